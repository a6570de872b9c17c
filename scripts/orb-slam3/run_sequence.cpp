// Runs the real ORB-SLAM3 v1.0 (linked from the build scripts/setup-orb-slam3.sh makes) on a
// sequence laid out by scripts/orb_slam3_e2e.py, headless, as its EuRoC examples do (frames
// paced at the sequence's rate, the IMU samples up to each frame handed with it), and logs
// what a comparison needs that the examples do not: the tracking state after every frame.
//
//   run_sequence VOCABULARY SETTINGS MODE SEQ_DIR OUT_DIR [PACE]
//
// PACE (default 1): frames are handed PACE times slower than the sequence's rate (its local
// mapping and loop closing threads then finish more of their work between frames, so
// repeated runs on the same input differ less; 1 is the examples' real time). PACE 0 is
// lockstep: the next frame is handed only when local mapping has processed every keyframe
// (its queue empty and its loop back to accepting keyframes) and loop closing has taken and
// finished the last one, whatever the machine's speed. Tracking then sees the same map at
// every frame in every run, so a run's outcome depends on its input, not on the threads'
// timing (docs/slam.md measures how far that goes).
// SEQ_DIR `-`: a live stream on stdin instead of a folder (scripts/orb-slam3/live.py writes it
// from ROS 2 topics), records in arrival order, little-endian:
//   "IMU1" i64 t_ns, 6 x f64 (ax ay az wx wy wz)        an IMU sample, handed with the next frame
//   "CLD1" i32 camera, i32 nFeatures, u32 n, n bytes   a cloud's GFK1 record for the adapter
//   "FRM1" i64 t_ns, u32 cameras, per camera u32 rows, u32 cols, u32 channels, the pixels
// until EOF; no pacing (the stream is the clock), PACE 0 still lockstep. The clouds go to the
// adapter (gf_features.so in LD_PRELOAD) through its gf_features_push.
// MODE: mono | mono-inertial | stereo | stereo-inertial. SEQ_DIR/frames.csv: `t_ns,cam0[,cam1]`
// (image paths, relative to SEQ_DIR); SEQ_DIR/imu.csv: `t_ns,wx,wy,wz,ax,ay,az`.
// Writes (OUT_DIR made when missing) OUT_DIR/states.csv (`t_ns,state,track_ms`: Tracking::eTrackingState after the
// frame), OUT_DIR/trajectory.txt (SaveTrajectoryEuRoC: `t_ns x y z qx qy qz qw`, the body for
// the inertial modes, the camera otherwise) and OUT_DIR/keyframes.txt, when a frame was
// tracked at all.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <list>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "LocalMapping.h"
#include "LoopClosing.h"
#include "System.h"
#include "Tracking.h"

namespace {

// ORB-SLAM3 keeps its threads' objects private and has no "wait until idle" call. The
// standard's explicit-instantiation rule (access checks do not apply to the template
// arguments of an explicit instantiation) gives a pointer to the members lockstep reads, without
// patching ORB-SLAM3 or changing its layout.
template <typename Tag, typename Tag::type Member>
struct Expose {
    friend typename Tag::type member(Tag) { return Member; }
};
#define GF_EXPOSE(NAME, CLASS, TYPE, FIELD)                  \
    struct NAME {                                            \
        typedef TYPE CLASS::*type;                           \
        friend type member(NAME);                            \
    };                                                       \
    template struct Expose<NAME, &CLASS::FIELD>;
GF_EXPOSE(SystemLocalMapper, ORB_SLAM3::System, ORB_SLAM3::LocalMapping*, mpLocalMapper)
GF_EXPOSE(SystemLoopCloser, ORB_SLAM3::System, ORB_SLAM3::LoopClosing*, mpLoopCloser)
GF_EXPOSE(LoopQueue, ORB_SLAM3::LoopClosing, std::list<ORB_SLAM3::KeyFrame*>, mlpLoopKeyFrameQueue)
GF_EXPOSE(LoopQueueMutex, ORB_SLAM3::LoopClosing, std::mutex, mMutexLoopQueue)
GF_EXPOSE(LoopCurrent, ORB_SLAM3::LoopClosing, ORB_SLAM3::KeyFrame*, mpCurrentKF)
GF_EXPOSE(LoopLast, ORB_SLAM3::LoopClosing, ORB_SLAM3::KeyFrame*, mpLastCurrentKF)
GF_EXPOSE(LoopActive, ORB_SLAM3::LoopClosing, bool, mbActiveLC)
#undef GF_EXPOSE

// Local mapping and loop closing idle: every keyframe tracking inserted has been through
// local mapping (which hands it to loop closing before it accepts keyframes again) and
// through loop closing's place recognition (LoopClosing::Run sets its last keyframe to the
// current one when a keyframe is done; a merge it aborts skips that, and the wait gives up
// after 10 s). Read twice, 1 ms apart, as the threads toggle their
// flags between their iterations.
bool idle(ORB_SLAM3::System& slam) {
    ORB_SLAM3::LocalMapping* lm = slam.*member(SystemLocalMapper());
    ORB_SLAM3::LoopClosing* lc = slam.*member(SystemLoopCloser());
    if (lm->KeyframesInQueue() != 0 || !lm->AcceptKeyFrames()) return false;
    // With `loopClosing: 0` its queue is never taken from: nothing to wait for there.
    if (!(lc->*member(LoopActive()))) return true;
    {
        std::unique_lock<std::mutex> lock(lc->*member(LoopQueueMutex()));
        if (!(lc->*member(LoopQueue())).empty()) return false;
    }
    auto* volatile current = lc->*member(LoopCurrent());
    auto* volatile last = lc->*member(LoopLast());
    return current == last && !lc->isRunningGBA();
}

void wait_idle(ORB_SLAM3::System& slam) {
    const auto start = std::chrono::steady_clock::now();
    int calm = 0;
    while (calm < 2) {
        calm = idle(slam) ? calm + 1 : 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
            std::fprintf(stderr, "lockstep: ORB-SLAM3's threads busy for 10 s; going on\n");
            return;
        }
    }
}

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
    std::vector<std::vector<std::string>> rows;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> cells;
        std::stringstream ss(line);
        std::string c;
        while (std::getline(ss, c, ',')) cells.push_back(c);
        rows.push_back(cells);
    }
    return rows;
}

struct Input {
    long long t_ns = 0;
    cv::Mat left, right;
    std::vector<ORB_SLAM3::IMU::Point> imu;
};

// A sequence folder: frames.csv, imu.csv, the images.
struct FolderInput {
    std::string seq;
    bool stereo, inertial;
    std::vector<std::vector<std::string>> frames, imu;
    size_t next = 0, next_imu = 0;

    std::string open() {
        frames = read_csv(seq + "/frames.csv");
        if (inertial) imu = read_csv(seq + "/imu.csv");
        return frames.empty() ? seq + "/frames.csv: no frames" : "";
    }
    double period() const {
        return frames.size() > 1
            ? (std::stoll(frames.back()[0]) - std::stoll(frames.front()[0])) * 1e-9 / (frames.size() - 1)
            : 0.05;
    }
    // false at the end; `error` set when an image cannot be read.
    bool read(Input& in, std::string& error) {
        if (next == frames.size()) return false;
        const auto& row = frames[next++];
        in.t_ns = std::stoll(row[0]);
        in.left = cv::imread(seq + "/" + row[1], cv::IMREAD_UNCHANGED);
        if (stereo) in.right = cv::imread(seq + "/" + row.at(2), cv::IMREAD_UNCHANGED);
        if (in.left.empty() || (stereo && in.right.empty())) {
            error = "cannot read the images of frame " + row[0];
            return false;
        }
        in.imu.clear();
        while (inertial && next_imu < imu.size() && std::stoll(imu[next_imu][0]) <= in.t_ns) {
            const auto& m = imu[next_imu++];
            in.imu.emplace_back(std::stof(m[4]), std::stof(m[5]), std::stof(m[6]), std::stof(m[1]),
                                std::stof(m[2]), std::stof(m[3]), std::stoll(m[0]) * 1e-9);
        }
        return true;
    }
};

// The live stream on stdin (see the top); clouds are pushed to the adapter as they come.
struct StreamInput {
    bool stereo;
    typedef int (*Push)(int, int, const char*, size_t);
    Push push = nullptr;
    long clouds = 0, imu_samples = 0;

    std::string open() {
        typedef int (*Live)();
        auto live = reinterpret_cast<Live>(dlsym(RTLD_DEFAULT, "gf_features_live"));
        push = reinterpret_cast<Push>(dlsym(RTLD_DEFAULT, "gf_features_push"));
        if (!live || !push) return "stream input needs the adapter: LD_PRELOAD=.../gf_features.so";
        live();
        return "";
    }
    template <typename T>
    static bool get(T& v) { return std::fread(&v, sizeof(T), 1, stdin) == 1; }
    bool read(Input& in, std::string& error) {
        in.imu.clear();
        for (;;) {
            char tag[4];
            const size_t got = std::fread(tag, 1, 4, stdin);
            if (got == 0) return false;  // the end of the stream
            if (got != 4) return (error = "stream: truncated record tag"), false;
            if (!std::memcmp(tag, "IMU1", 4)) {
                int64_t t;
                double v[6];
                if (!get(t) || std::fread(v, sizeof(double), 6, stdin) != 6) return (error = "stream: truncated IMU"), false;
                in.imu.emplace_back(float(v[0]), float(v[1]), float(v[2]), float(v[3]), float(v[4]), float(v[5]), t * 1e-9);
                ++imu_samples;
            } else if (!std::memcmp(tag, "CLD1", 4)) {
                int32_t cam, n;
                uint32_t len;
                if (!get(cam) || !get(n) || !get(len)) return (error = "stream: truncated cloud"), false;
                std::vector<char> rec(len);
                if (len && std::fread(rec.data(), 1, len, stdin) != len) return (error = "stream: truncated cloud"), false;
                push(cam, n, rec.data(), rec.size());
                ++clouds;
            } else if (!std::memcmp(tag, "FRM1", 4)) {
                int64_t t;
                uint32_t ncam;
                if (!get(t) || !get(ncam) || ncam < 1 || ncam > 2) return (error = "stream: bad frame header"), false;
                in.t_ns = t;
                for (uint32_t c = 0; c < ncam; ++c) {
                    uint32_t rows, cols, ch;
                    if (!get(rows) || !get(cols) || !get(ch) || (ch != 1 && ch != 3) || rows > 16384 || cols > 16384)
                        return (error = "stream: bad image header"), false;
                    cv::Mat m(int(rows), int(cols), ch == 1 ? CV_8UC1 : CV_8UC3);
                    if (std::fread(m.data, 1, m.total() * m.elemSize(), stdin) != m.total() * m.elemSize())
                        return (error = "stream: truncated image"), false;
                    (c == 0 ? in.left : in.right) = m;
                }
                if (stereo && ncam != 2) return (error = "stream: a stereo mode needs two images per frame"), false;
                return true;
            } else {
                return (error = "stream: unknown record tag"), false;
            }
        }
    }
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 6 && argc != 7) {
        std::fprintf(stderr, "usage: %s VOCABULARY SETTINGS MODE SEQ_DIR OUT_DIR [PACE]\n", argv[0]);
        return 2;
    }
    const double pace_arg = argc == 7 ? std::atof(argv[6]) : 1.0;
    const bool lockstep = pace_arg == 0.0;
    const double pace = std::max(1.0, pace_arg);
    const std::string mode = argv[3], seq = argv[4], out = argv[5];
    ORB_SLAM3::System::eSensor sensor;
    if (mode == "mono") sensor = ORB_SLAM3::System::MONOCULAR;
    else if (mode == "mono-inertial") sensor = ORB_SLAM3::System::IMU_MONOCULAR;
    else if (mode == "stereo") sensor = ORB_SLAM3::System::STEREO;
    else if (mode == "stereo-inertial") sensor = ORB_SLAM3::System::IMU_STEREO;
    else {
        std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    }
    const bool stereo = sensor == ORB_SLAM3::System::STEREO || sensor == ORB_SLAM3::System::IMU_STEREO;
    const bool inertial = sensor == ORB_SLAM3::System::IMU_MONOCULAR || sensor == ORB_SLAM3::System::IMU_STEREO;
    const bool live = seq == "-";
    FolderInput folder{seq, stereo, inertial};
    StreamInput stream{stereo};
    const std::string opened = live ? stream.open() : folder.open();
    if (!opened.empty()) {
        std::fprintf(stderr, "%s\n", opened.c_str());
        return 1;
    }
    // OUT_DIR made as `mkdir -p` would (ORB-SLAM3's savers write nothing, and say nothing,
    // into a folder that does not exist).
    for (size_t i = 1; i <= out.size(); ++i) {
        if (i == out.size() || out[i] == '/') mkdir(out.substr(0, i).c_str(), 0755);
    }
    struct stat st;
    if (stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        std::fprintf(stderr, "cannot make the output folder %s\n", out.c_str());
        return 1;
    }
    ORB_SLAM3::System slam(argv[1], argv[2], sensor, false);
    std::ofstream states(out + "/states.csv");
    states << "t_ns,state,track_ms\n";
    bool tracked = false;
    const double period = live ? 0.0 : pace * folder.period();
    Input in;
    std::string error;
    while (live ? stream.read(in, error) : folder.read(in, error)) {
        const double t = in.t_ns * 1e-9;
        const auto t0 = std::chrono::steady_clock::now();
        if (stereo) slam.TrackStereo(in.left, in.right, t, in.imu);
        else slam.TrackMonocular(in.left, t, in.imu);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const int state = slam.GetTrackingState();
        tracked |= state == ORB_SLAM3::Tracking::OK || state == ORB_SLAM3::Tracking::OK_KLT;
        states << in.t_ns << "," << state << "," << ms << "\n";
        states.flush();
        if (lockstep) {
            wait_idle(slam);
            continue;
        }
        // Paced as the examples pace: the rest of the frame period.
        if (ms * 1e-3 < period)
            std::this_thread::sleep_for(std::chrono::duration<double>(period - ms * 1e-3));
    }
    if (!error.empty()) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 1;
    }
    if (live)
        std::fprintf(stderr, "stream: %ld clouds, %ld IMU samples\n", stream.clouds, stream.imu_samples);
    states.close();
    slam.Shutdown();
    // ORB-SLAM3's savers read a map with keyframes (an uninitialised pointer otherwise):
    // without a single tracked frame there is no trajectory to write.
    if (tracked) {
        slam.SaveTrajectoryEuRoC(out + "/trajectory.txt");
        slam.SaveKeyFrameTrajectoryEuRoC(out + "/keyframes.txt");
    } else {
        std::fprintf(stderr, "no frame was tracked: no trajectory\n");
    }
    return 0;
}
