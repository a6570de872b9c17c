// Lifts pixels with camodocal's own liftProjective (the camera library VINS-Fusion links,
// built by ../shared/vins-fusion/setup.sh) and prints what VINS's FeatureTracker keeps of
// each: cv::Point2f(x / z, y / z), as the two floats' bit patterns, so that
// scripts/lift_parity.py can compare our lifting with it bit for bit. A test tool: it links
// VINS-Fusion's camodocal (GPL-3.0) and is built at test time, never shipped.
//
//   lift_harness CAMERA.yaml < points.txt > lifted.txt
// points.txt: "u v" per line (pixels, each a float VINS would hold); lifted.txt: "xbits ybits"
// in hex per line.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "camodocal/camera_models/CameraFactory.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CAMERA.yaml < points\n", argv[0]);
    return 2;
  }
  camodocal::CameraPtr cam = camodocal::CameraFactory::instance()->generateCameraFromYamlFile(argv[1]);
  if (!cam) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  double u, v;
  while (std::scanf("%lf %lf", &u, &v) == 2) {
    Eigen::Vector3d b;
    cam->liftProjective(Eigen::Vector2d(u, v), b);
    float x = b.x() / b.z(), y = b.y() / b.z();
    std::uint32_t xb, yb;
    std::memcpy(&xb, &x, 4);
    std::memcpy(&yb, &y, 4);
    std::printf("%08x %08x\n", xb, yb);
  }
  return 0;
}
