// Runs the real VINS-Mono FeatureTracker (feature_tracker.cpp from a VINS-Mono checkout,
// linked with the camodocal library ../shared/vins-fusion/setup.sh builds, on Debian's
// OpenCV) on frames listed in an index file, driven frame by frame as VINS-Mono's
// feature_tracker node drives it, and prints the `feature` messages that node would publish,
// so that scripts/vins_parity.py --mono can compare them with ours. A test tool: it links
// VINS-Mono (GPL-3.0) and is built at test time by scripts/setup-vins-mono.sh, never shipped.
//
//   mono_harness CONFIG.yaml INDEX.txt > out.txt
// CONFIG.yaml: a VINS-Mono config (camera and front-end keys in one file).
// INDEX.txt: one frame per line, "stamp_seconds path.pgm" (8-bit gray).
// Output: "R index stamp" for a restart; for a published frame "F index stamp ms" then one
// line per feature in message order: "P id camera x y z u v vx vy" (%.9g of each float).
//
// The node's per-frame control (image callback) is restated here, because the node itself
// needs a ROS master: the first frame only starts the clock; a stamp more than 1 s ahead or
// going back sends restart and the next frame starts the clock again; the frequency control
// picks the published frames (PUB_THIS_FRAME); the first published message is not sent; a
// message carries the tracks seen at least twice, with id * NUM_OF_CAM + camera.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <opencv2/imgcodecs.hpp>

#include "feature_tracker.h"

// The globals parameters.cpp defines (it reads them through a ROS node handle).
std::string IMAGE_TOPIC, IMU_TOPIC, FISHEYE_MASK;
std::vector<std::string> CAM_NAMES;
int MAX_CNT, MIN_DIST, WINDOW_SIZE, FREQ, SHOW_TRACK, STEREO_TRACK, EQUALIZE, ROW, COL,
    FOCAL_LENGTH, FISHEYE;
double F_THRESHOLD;
bool PUB_THIS_FRAME;

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CONFIG.yaml INDEX.txt\n", argv[0]);
    return 2;
  }
  cv::FileStorage fs(argv[1], cv::FileStorage::READ);
  if (!fs.isOpened()) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  MAX_CNT = fs["max_cnt"];
  MIN_DIST = fs["min_dist"];
  ROW = fs["image_height"];
  COL = fs["image_width"];
  FREQ = fs["freq"];
  F_THRESHOLD = fs["F_threshold"];
  EQUALIZE = fs["equalize"];
  FISHEYE = fs["fisheye"];
  if (FISHEYE) {
    std::fprintf(stderr, "fisheye masks are not handled by this harness\n");
    return 1;
  }
  WINDOW_SIZE = 20;
  STEREO_TRACK = false;
  FOCAL_LENGTH = 460;
  PUB_THIS_FRAME = false;
  if (FREQ == 0) FREQ = 100;
  fs.release();

  FeatureTracker tracker;
  tracker.readIntrinsicParameter(argv[1]);
  bool first_image = true, sent_any = false;
  double first_time = 0, last_time = 0;
  int pub_count = 1;

  std::ifstream index(argv[2]);
  std::string line;
  int n = -1;
  while (std::getline(index, line)) {
    std::istringstream fields(line);
    double stamp;
    std::string path;
    if (!(fields >> stamp >> path)) continue;
    ++n;
    if (first_image) {
      first_image = false;
      first_time = last_time = stamp;
      continue;
    }
    if (stamp - last_time > 1.0 || stamp < last_time) {
      first_image = true;
      last_time = 0;
      pub_count = 1;
      std::printf("R %d %.9f\n", n, stamp);
      continue;
    }
    last_time = stamp;
    double rate = 1.0 * pub_count / (stamp - first_time);
    PUB_THIS_FRAME = std::round(rate) <= FREQ;
    if (PUB_THIS_FRAME && std::abs(rate - FREQ) < 0.01 * FREQ) {
      first_time = stamp;
      pub_count = 0;
    }
    cv::Mat img = cv::imread(path, cv::IMREAD_GRAYSCALE);
    if (img.empty()) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    tracker.readImage(img, stamp);
    for (unsigned int i = 0; tracker.updateID(i); i++) {
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!PUB_THIS_FRAME) continue;
    pub_count++;
    if (!sent_any) {
      sent_any = true;
      continue;
    }
    std::printf("F %d %.9f %.6f\n", n, stamp, ms);
    for (size_t j = 0; j < tracker.ids.size(); j++) {
      if (tracker.track_cnt[j] <= 1) continue;
      std::printf("P %d 0 %.9g %.9g 1 %.9g %.9g %.9g %.9g\n", tracker.ids[j] * NUM_OF_CAM,
                  (float)tracker.cur_un_pts[j].x, (float)tracker.cur_un_pts[j].y,
                  (float)tracker.cur_pts[j].x, (float)tracker.cur_pts[j].y,
                  (float)tracker.pts_velocity[j].x, (float)tracker.pts_velocity[j].y);
    }
  }
  return 0;
}
