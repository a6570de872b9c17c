// Runs the real VINS-Fusion FeatureTracker (its library from ../shared/vins-fusion, built by
// its setup.sh) on frames listed in an index file, and prints what trackImage returns, so
// that scripts/vins_parity.py can compare it with our tracker frame for frame. A test tool:
// it links VINS-Fusion (GPL-3.0) and is built at test time, never shipped.
//
//   track_harness CONFIG.yaml INDEX.txt > out.txt
// INDEX.txt: one frame per line, "stamp_seconds path.pgm" (8-bit gray), or with a stereo
// config "stamp_seconds left.pgm right.pgm" (trackImage with both images).
// Output, per frame: "F index stamp ms" (trackImage's wall time), then one line per feature
// in id order: "P id camera x y z u v vx vy" (each value as the float VINS holds, %.9g).
//
//   track_harness --clahe CLIP TILES IN.pgm OUT.pgm [...]
// OpenCV's CLAHE (createCLAHE(CLIP, Size(TILES, TILES))->apply, what VINS-Mono's equalize
// runs) on each image, for scripts/clahe_parity.py.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "estimator/parameters.h"
#include "featureTracker/feature_tracker.h"

int main(int argc, char **argv) {
  if (argc >= 6 && std::string(argv[1]) == "--clahe") {
    auto clahe = cv::createCLAHE(std::atof(argv[2]), cv::Size(std::atoi(argv[3]), std::atoi(argv[3])));
    for (int i = 4; i + 1 < argc; i += 2) {
      cv::Mat in = cv::imread(argv[i], cv::IMREAD_GRAYSCALE), out;
      if (in.empty()) {
        std::fprintf(stderr, "cannot read %s\n", argv[i]);
        return 1;
      }
      clahe->apply(in, out);
      if (!cv::imwrite(argv[i + 1], out)) return 1;
    }
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CONFIG.yaml INDEX.txt\n", argv[0]);
    return 2;
  }
  readParameters(argv[1]);
  FeatureTracker tracker;
  tracker.readIntrinsicParameter(CAM_NAMES);
  std::ifstream index(argv[2]);
  std::string line;
  int n = 0;
  while (std::getline(index, line)) {
    std::istringstream fields(line);
    double stamp;
    std::string path, path1;
    if (!(fields >> stamp >> path)) continue;
    fields >> path1;
    cv::Mat img = cv::imread(path, cv::IMREAD_GRAYSCALE), img1;
    if (!path1.empty()) img1 = cv::imread(path1, cv::IMREAD_GRAYSCALE);
    if (img.empty() || (!path1.empty() && img1.empty())) {
      std::fprintf(stderr, "cannot read %s %s\n", path.c_str(), path1.c_str());
      return 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto frame = tracker.trackImage(stamp, img, img1);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("F %d %.9f %.6f\n", n++, stamp, ms);
    for (auto &f : frame) {
      for (auto &c : f.second) {
        const auto &v = c.second;
        std::printf("P %d %d %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", f.first, c.first, (float)v(0),
                    (float)v(1), (float)v(2), (float)v(3), (float)v(4), (float)v(5), (float)v(6));
      }
    }
  }
  return 0;
}
