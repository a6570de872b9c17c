// The images ORB-SLAM3 extracts from in a PinHole stereo mode: it rectifies every pair
// before extracting (System::TrackStereo: cv::remap with its Settings' maps, INTER_LINEAR),
// so a front-end that feeds it must see the same rectified pixels. This computes them with
// ORB-SLAM3's own Settings (the same maps, the same remap), for gpu_features' replay.
//
//   rectify_stereo SETTINGS SEQ_DIR OUT_DIR
//
// SEQ_DIR/frames.csv `t_ns,cam0,cam1` (scripts/orb-slam3/e2e.py's layout); writes
// OUT_DIR/cam0/<t>.png, OUT_DIR/cam1/<t>.png and OUT_DIR/frames.csv the same way.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "Settings.h"
#include "System.h"

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s SETTINGS SEQ_DIR OUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string seq = argv[2], out = argv[3];
    ORB_SLAM3::Settings settings(argv[1], ORB_SLAM3::System::IMU_STEREO);
    if (!settings.needToRectify()) {
        std::fprintf(stderr, "%s: these settings do not rectify (not PinHole stereo)\n", argv[1]);
        return 1;
    }
    mkdir(out.c_str(), 0755);
    mkdir((out + "/cam0").c_str(), 0755);
    mkdir((out + "/cam1").c_str(), 0755);
    std::ifstream in(seq + "/frames.csv");
    std::ofstream list(out + "/frames.csv");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        std::stringstream ss(line);
        std::string t, c0, c1;
        std::getline(ss, t, ',');
        std::getline(ss, c0, ',');
        std::getline(ss, c1, ',');
        cv::Mat l = cv::imread(seq + "/" + c0, cv::IMREAD_UNCHANGED), r = cv::imread(seq + "/" + c1, cv::IMREAD_UNCHANGED);
        if (l.empty() || r.empty()) {
            std::fprintf(stderr, "cannot read frame %s\n", t.c_str());
            return 1;
        }
        cv::Mat lo, ro;
        cv::remap(l, lo, settings.M1l(), settings.M2l(), cv::INTER_LINEAR);
        cv::remap(r, ro, settings.M1r(), settings.M2r(), cv::INTER_LINEAR);
        cv::imwrite(out + "/cam0/" + t + ".png", lo);
        cv::imwrite(out + "/cam1/" + t + ".png", ro);
        list << t << ",cam0/" << t << ".png,cam1/" << t << ".png\n";
        ++n;
    }
    std::fprintf(stderr, "rectified %d pairs\n", n);
    return 0;
}
