// ORB-SLAM3 fed by gpu_features: a drop-in `ORB_SLAM3::Frame::ExtractORB` that takes each
// frame's keypoints and descriptors from gpu_features' `keypoints` clouds instead of running
// ORB-SLAM3's ORBextractor. Built as a shared object against ORB-SLAM3 v1.0's headers
// (scripts/setup-orb-slam3.sh) and loaded before libORB_SLAM3.so (LD_PRELOAD): ORB-SLAM3
// calls ExtractORB through the PLT (Frame's constructors and its stereo threads), so this
// definition takes the place of its own; ORB-SLAM3 itself is not changed. Everything after
// the call (undistortion, the grid, BoW, tracking, mapping) is ORB-SLAM3's, and it still
// reads its ORBextractor's scale tables.
//
// Input: GF_FEATURES_DIR holds one file per camera and extractor budget,
// `cam<flag>_<nFeatures>.gfkp` (flag 0 left/mono, 1 right; nFeatures: the extractor's, so
// the initialisation extractor's 5x budget has its own file), written from the clouds by
// scripts/orb-slam3/clouds_to_gfkp.py. A file is a run of records, little-endian:
//   "GFK1", i64 stamp (ns), u32 field count, per field {u8 name length, name, u32 offset,
//   u8 datatype, u32 count}, u32 point_step, u32 points, points * point_step bytes
// i.e. the cloud's own PointField layout and data as the node publishes them
// (src/output/pointcloud.rs): x, y, size, angle, octave as FLOAT32 and a 32 x UINT8
// `descriptor` field are required; response is read when present.
//
// Live (scripts/orb-slam3/live.py, the node's clouds over ROS 2): run_sequence reads frames,
// IMU samples and clouds from a stream, calls gf_features_live() once and hands each cloud's
// record to gf_features_push() before its frame; the records are then kept in memory (the
// last 64 per camera and budget) instead of read from files.
//
// Per frame: the record whose stamp is nearest the frame's (within 1 us). The cloud's order
// is gpu_features' (levels in turn, each in ORB-SLAM3's quadtree node order); the lapping
// area ExtractORB is given is applied as `ORBextractor::operator()` applies it, so mvKeys
// and mDescriptors come out in ORB-SLAM3's own order, and monoLeft/monoRight as it returns.
// A stereo frame also gets its extractor's image pyramid (ComputePyramid), which ORB-SLAM3's
// stereo matching reads.
//
// GF_FEATURES_CHECK=1 also runs ORB-SLAM3's own extractor on the image ORB-SLAM3 handed over
// (after its own rectification or resizing) and counts the frames where anything differs
// from what we fed: the consumer's code as the oracle inside a running SLAM (extraction time
// is then ORB-SLAM3's again; for verification, not for timing).
//
// Bad input never stops the SLAM process: a missing file, a frame without a record, a
// cloud without the fields, with a short point_step, a truncated record or an octave beyond
// the extractor's levels makes that frame's keypoints empty (ORB-SLAM3 treats it as a frame
// without features), is said once on stderr and counted; the counts are printed at exit
// and written to GF_FEATURES_STATS (JSON) when set.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "Frame.h"
#include "ORBextractor.h"

namespace {

// The extractor's budget and pyramid, which ORB-SLAM3 keeps protected: reached through
// pointers to members named in a derived class (no object of it is made).
struct Access : ORB_SLAM3::ORBextractor {
    using ORB_SLAM3::ORBextractor::ComputePyramid;
    using ORB_SLAM3::ORBextractor::nfeatures;
};

struct Field {
    uint32_t offset = 0;
    uint8_t datatype = 0;
    uint32_t count = 0;
    bool present = false;
};

// One camera's and budget's clouds: each record's bytes from its field count on, by stamp.
struct Source {
    std::map<int64_t, std::vector<char>> by_stamp;
    bool loaded = false;
    std::string error;
};

struct Stats {
    long fed = 0, skipped = 0, keypoints = 0;
    // GF_FEATURES_CHECK: frames compared with ORB-SLAM3's own extractor on the same image,
    // and those where anything differed.
    long checked = 0, check_differs = 0;
    std::map<std::string, long> reasons;
};

std::mutex g_mutex;
std::map<std::string, Source> g_sources;
Stats g_stats;

template <typename T>
bool read_at(const std::vector<char>& b, size_t& at, T& v) {
    if (at + sizeof(T) > b.size()) return false;
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return true;
}

// Splits a run of GFK1 records (a file, or one pushed record) into `s`; "" or why not.
std::string index_records(const std::vector<char>& b, Source& s) {
    size_t at = 0;
    while (at < b.size()) {
        const size_t start = at;
        char magic[4];
        if (at + 4 > b.size()) return "truncated record header";
        std::memcpy(magic, b.data() + at, 4);
        at += 4;
        if (std::memcmp(magic, "GFK1", 4) != 0) return "bad magic at byte " + std::to_string(start);
        int64_t stamp;
        uint32_t nfields;
        if (!read_at(b, at, stamp) || !read_at(b, at, nfields)) return "truncated record";
        const size_t table = at - 4;
        for (uint32_t f = 0; f < nfields; ++f) {
            uint8_t len;
            if (!read_at(b, at, len)) return "truncated field table";
            at += len + 4 + 1 + 4;
        }
        uint32_t step, n;
        if (!read_at(b, at, step) || !read_at(b, at, n)) return "truncated record";
        const uint64_t data = uint64_t(step) * n;
        if (at + data > b.size()) return "truncated point data at stamp " + std::to_string(stamp);
        at += data;
        s.by_stamp[stamp].assign(b.begin() + table, b.begin() + at);
    }
    return "";
}

// Live input (run_sequence reading a stream, scripts/orb-slam3/live.py): the records come
// through gf_features_push instead of files, and each source keeps its last kLiveRecords.
bool g_live = false;
constexpr size_t kLiveRecords = 64;

std::string source_key(int flag, int nfeatures) {
    return "cam" + std::to_string(flag) + "_" + std::to_string(nfeatures);
}

Source& source(int flag, int nfeatures) {
    if (g_live) {
        Source& s = g_sources[source_key(flag, nfeatures)];
        if (!s.loaded) {
            s.loaded = true;
            s.error = "no cloud pushed for " + source_key(flag, nfeatures) + " (is its topic given to the bridge?)";
        }
        return s;
    }
    const char* dir = std::getenv("GF_FEATURES_DIR");
    const std::string path = std::string(dir ? dir : ".") + "/" + source_key(flag, nfeatures) + ".gfkp";
    Source& s = g_sources[path];
    if (!s.loaded) {
        s.loaded = true;
        std::ifstream f(path, std::ios::binary);
        if (!f) {
            s.error = "cannot open " + path;
        } else {
            const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            s.error = index_records(bytes, s);
            if (!s.error.empty()) s.error = path + ": " + s.error;
        }
        if (!s.error.empty()) std::fprintf(stderr, "[gf_features] %s\n", s.error.c_str());
    }
    return s;
}

void skip(const std::string& reason, double t) {
    if (g_stats.reasons[reason]++ == 0)
        std::fprintf(stderr, "[gf_features] frame at %.9f s skipped: %s (said once; counted)\n", t,
                     reason.c_str());
    ++g_stats.skipped;
}

// The record's keypoints and descriptors, in the cloud's order; "" or why not.
std::string parse(const std::vector<char>& b, int nlevels, std::vector<cv::KeyPoint>& kps, cv::Mat& desc) {
    size_t at = 0;
    uint32_t nfields;
    read_at(b, at, nfields);
    std::map<std::string, Field> fields;
    for (uint32_t i = 0; i < nfields; ++i) {
        uint8_t len;
        read_at(b, at, len);
        std::string name(b.data() + at, len);
        at += len;
        Field f;
        read_at(b, at, f.offset);
        read_at(b, at, f.datatype);
        read_at(b, at, f.count);
        f.present = true;
        fields[name] = f;
    }
    uint32_t step, n;
    read_at(b, at, step);
    read_at(b, at, n);
    const char* data = b.data() + at;
    for (const char* name : {"x", "y", "size", "angle", "octave"}) {
        const Field& f = fields[name];
        if (!f.present) return std::string("cloud without the ") + name + " field";
        if (f.datatype != 7 || f.count != 1) return std::string("field ") + name + " is not one FLOAT32";
        if (f.offset + 4 > step) return "point_step " + std::to_string(step) + " too short for field " + name;
    }
    const Field& d = fields["descriptor"];
    if (!d.present) return "cloud without descriptors (set describe.enabled)";
    if (d.datatype != 2 || d.count != 32) return "descriptor field is not 32 x UINT8";
    if (d.offset + 32 > step) return "point_step " + std::to_string(step) + " too short for the descriptor";
    const Field& r = fields["response"];
    const bool has_response = r.present && r.datatype == 7 && r.count == 1 && r.offset + 4 <= step;
    auto f32 = [&](uint32_t i, const Field& f) {
        float v;
        std::memcpy(&v, data + size_t(i) * step + f.offset, 4);
        return v;
    };
    kps.resize(n);
    desc.create(int(n), 32, CV_8U);
    for (uint32_t i = 0; i < n; ++i) {
        const float oct = f32(i, fields["octave"]);
        if (!(oct >= 0) || oct >= nlevels || oct != std::floor(oct))
            return "octave " + std::to_string(oct) + " beyond the settings' " + std::to_string(nlevels) + " levels";
        cv::KeyPoint& k = kps[i];
        k.pt.x = f32(i, fields["x"]);
        k.pt.y = f32(i, fields["y"]);
        k.size = f32(i, fields["size"]);
        k.angle = f32(i, fields["angle"]);
        k.response = has_response ? f32(i, r) : 0.0f;
        k.octave = int(oct);
        k.class_id = -1;
        std::memcpy(desc.ptr<uint8_t>(int(i)), data + size_t(i) * step + d.offset, 32);
    }
    return "";
}

// ORBextractor::operator()'s output order: keypoints with x in [x0, x1] to the back,
// reversed (its stereoIndex), the others to the front (monoIndex); returns monoIndex.
int lapping(const std::vector<cv::KeyPoint>& in, const cv::Mat& din, int x0, int x1,
            std::vector<cv::KeyPoint>& out, cv::Mat& dout) {
    const int n = int(in.size());
    out.assign(n, cv::KeyPoint());
    dout.create(n, 32, CV_8U);
    int mono = 0, stereo = n - 1;
    for (int i = 0; i < n; ++i) {
        const int to = (in[i].pt.x >= x0 && in[i].pt.x <= x1) ? stereo-- : mono++;
        out[to] = in[i];
        din.row(i).copyTo(dout.row(to));
    }
    return mono;
}

struct Report {
    ~Report() {
        std::fprintf(stderr, "[gf_features] %ld frames fed (%ld keypoints), %ld skipped", g_stats.fed,
                     g_stats.keypoints, g_stats.skipped);
        if (g_stats.checked)
            std::fprintf(stderr, "; checked against ORB-SLAM3's extractor: %ld frames, %ld differ", g_stats.checked,
                         g_stats.check_differs);
        std::fprintf(stderr, "\n");
        if (const char* path = std::getenv("GF_FEATURES_STATS")) {
            if (FILE* f = std::fopen(path, "w")) {
                std::fprintf(f,
                             "{\"fed\": %ld, \"keypoints\": %ld, \"skipped\": %ld, \"checked\": %ld, "
                             "\"check_differs\": %ld, \"reasons\": {",
                             g_stats.fed, g_stats.keypoints, g_stats.skipped, g_stats.checked, g_stats.check_differs);
                bool first = true;
                for (const auto& kv : g_stats.reasons) {
                    std::string key;
                    for (char c : kv.first) {
                        if (c == '"' || c == '\\') key += '\\';
                        key += (c >= 0 && c < 0x20) ? ' ' : c;
                    }
                    std::fprintf(f, "%s\"%s\": %ld", first ? "" : ", ", key.c_str(), kv.second);
                    first = false;
                }
                std::fprintf(f, "}}\n");
                std::fclose(f);
            }
        }
    }
} g_report;

}  // namespace

// The live input: run_sequence (stream mode) turns the adapter to pushed records before the
// first frame, then hands each cloud's GFK1 record here before the frame it belongs to.
// Returns 0, or -1 with the reason said (a malformed record; the frame is then skipped).
extern "C" int gf_features_live() {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_live = true;
    return 0;
}

extern "C" int gf_features_push(int flag, int nfeatures, const char* record, size_t len) {
    std::lock_guard<std::mutex> lock(g_mutex);
    Source& s = g_sources[source_key(flag, nfeatures)];
    s.loaded = true;
    s.error.clear();
    const std::string why = index_records(std::vector<char>(record, record + len), s);
    while (s.by_stamp.size() > kLiveRecords) s.by_stamp.erase(s.by_stamp.begin());
    if (!why.empty()) {
        if (g_stats.reasons["pushed record malformed: " + why]++ == 0)
            std::fprintf(stderr, "[gf_features] %s: pushed record malformed: %s (said once; counted)\n",
                         source_key(flag, nfeatures).c_str(), why.c_str());
        return -1;
    }
    return 0;
}

void ORB_SLAM3::Frame::ExtractORB(int flag, const cv::Mat& im, const int x0, const int x1) {
    ORBextractor* ex = flag == 0 ? mpORBextractorLeft : mpORBextractorRight;
    std::vector<cv::KeyPoint>& keys = flag == 0 ? mvKeys : mvKeysRight;
    cv::Mat& descs = flag == 0 ? mDescriptors : mDescriptorsRight;
    int& mono = flag == 0 ? monoLeft : monoRight;
    if (mpORBextractorRight) {
        // Stereo matching (ComputeStereoMatches) reads the extractor's pyramid.
        (ex->*(&Access::ComputePyramid))(im);
    }
    const int nfeatures = ex->*(&Access::nfeatures);
    std::vector<cv::KeyPoint> got;
    cv::Mat d;
    std::string why;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        Source& s = source(flag, nfeatures);
        const int64_t t = std::llround(mTimeStamp * 1e9);
        if (!s.error.empty()) {
            why = "no features for camera " + std::to_string(flag) + " at " + std::to_string(nfeatures) +
                  " points (" + s.error + ")";
        } else {
            auto it = s.by_stamp.lower_bound(t - 1000);
            if (it == s.by_stamp.end() || it->first > t + 1000)
                why = "no cloud with the frame's stamp";
            else
                why = parse(it->second, ex->GetLevels(), got, d);
        }
        if (!why.empty()) {
            skip(why, mTimeStamp);
        } else {
            ++g_stats.fed;
            g_stats.keypoints += long(got.size());
        }
    }
    if (!why.empty()) {
        keys.clear();
        descs = cv::Mat();
        mono = 0;
        return;
    }
    std::vector<int> area = {x0, x1};
    mono = lapping(got, d, area[0], area[1], keys, descs);
    if (std::getenv("GF_FEATURES_CHECK")) {
        // ORB-SLAM3's own extractor on the very image it handed us (rectified, resized, as
        // it is): what it would have used. Every field and byte must be ours.
        std::vector<cv::KeyPoint> own;
        cv::Mat od;
        const int own_mono = (*ex)(im, cv::Mat(), own, od, area);
        bool same = own_mono == mono && own.size() == keys.size() && od.rows == descs.rows;
        for (size_t i = 0; same && i < own.size(); ++i) {
            const cv::KeyPoint &a = own[i], &b = keys[i];
            same = a.pt.x == b.pt.x && a.pt.y == b.pt.y && a.size == b.size && a.angle == b.angle &&
                   a.response == b.response && a.octave == b.octave &&
                   std::memcmp(od.ptr(int(i)), descs.ptr(int(i)), 32) == 0;
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        ++g_stats.checked;
        if (!same && g_stats.check_differs++ == 0)
            std::fprintf(stderr, "[gf_features] frame at %.9f s (camera %d): differs from ORB-SLAM3's extractor "
                         "(%zu keypoints vs its %zu)\n", mTimeStamp, flag, keys.size(), own.size());
    }
}
