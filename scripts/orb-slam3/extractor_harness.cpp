// ORB-SLAM3's own extractor as the oracle: links ORB-SLAM3 v1.0's ORBextractor.cc (compiled
// from ../shared/orb-slam3 by scripts/setup-orb-slam3.sh, never copied here) and prints what
// `ORBextractor::operator()` returns for each image, as Frame::ExtractORB calls it.
//
//   extractor_harness NFEATURES SCALE NLEVELS INI_TH MIN_TH X0 X1 REPEATS IMAGE...
//
// X0 X1: the lapping area ExtractORB passes ({0, 1000} for a monocular frame, {0, 0} for a
// stereo one). Images are read as ORB-SLAM3's examples read them (IMREAD_UNCHANGED) and made
// gray as Tracking does (BGR2GRAY). Output, one CSV row per keypoint in the returned order:
//   image,index,x,y,size,angle,response,octave,descriptor
// floats as %.9g (exact for f32), the descriptor as 64 hex characters, byte 0 first. Then one
// row per image on stderr: `time,IMAGE,MEDIAN_MS,MONO_INDEX` (REPEATS calls, the median).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "ORBextractor.h"

int main(int argc, char** argv) {
    if (argc < 10) {
        std::fprintf(stderr,
                     "usage: %s NFEATURES SCALE NLEVELS INI_TH MIN_TH X0 X1 REPEATS IMAGE...\n",
                     argv[0]);
        return 2;
    }
    const int nfeatures = std::atoi(argv[1]);
    const float scale = std::strtof(argv[2], nullptr);
    const int nlevels = std::atoi(argv[3]);
    const int ini = std::atoi(argv[4]), min_th = std::atoi(argv[5]);
    std::vector<int> lapping = {std::atoi(argv[6]), std::atoi(argv[7])};
    const int repeats = std::max(1, std::atoi(argv[8]));
    ORB_SLAM3::ORBextractor extractor(nfeatures, scale, nlevels, ini, min_th);
    std::printf("image,index,x,y,size,angle,response,octave,descriptor\n");
    for (int a = 9; a < argc; ++a) {
        cv::Mat im = cv::imread(argv[a], cv::IMREAD_UNCHANGED);
        if (im.empty()) {
            std::fprintf(stderr, "cannot read %s\n", argv[a]);
            return 1;
        }
        if (im.channels() == 3) cv::cvtColor(im, im, cv::COLOR_BGR2GRAY);
        if (im.channels() == 4) cv::cvtColor(im, im, cv::COLOR_BGRA2GRAY);
        std::vector<cv::KeyPoint> kps;
        cv::Mat desc;
        std::vector<double> ms;
        int mono = 0;
        for (int r = 0; r < repeats; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            mono = extractor(im, cv::Mat(), kps, desc, lapping);
            const auto t1 = std::chrono::steady_clock::now();
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        for (size_t i = 0; i < kps.size(); ++i) {
            const cv::KeyPoint& k = kps[i];
            std::printf("%s,%zu,%.9g,%.9g,%.9g,%.9g,%.9g,%d,", argv[a], i, k.pt.x, k.pt.y, k.size,
                        k.angle, k.response, k.octave);
            const unsigned char* d = desc.ptr<unsigned char>((int)i);
            for (int b = 0; b < 32; ++b) std::printf("%02x", d[b]);
            std::printf("\n");
        }
        std::fprintf(stderr, "time,%s,%.4f,%d\n", argv[a], ms[ms.size() / 2], mono);
    }
    return 0;
}
