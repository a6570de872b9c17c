#!/usr/bin/env python3
"""cv::Canny (50 / 150, L2 gradient, no blur: config/opencv_canny.yaml) on the frames of
`examples/canny_bands`: centre crops of the bench-data photo at 1280x720, 1920x1080 and
3840x2160, on T threads (`T`, default 2, as the example); the minimum and the median of N
runs each and the edge pixels. Run it beside the example (one after the other) and compare
minima. OpenCV decodes the JPEG itself (libjpeg), which differs from our decoder in a few
pixels: the edge counts differ by about 0.1 %, the work is the same.

    T=16 python3 scripts/cv_canny_speed.py [runs] [PHOTO]
"""
import os
import time

import cv2

from cv_fast_speed import runs_and_photo


def main():
    runs, src = runs_and_photo(300)
    threads = int(os.environ.get('T', '2'))
    cv2.setNumThreads(threads)
    for w, h in [(1280, 720), (1920, 1080), (3840, 2160)]:
        y0, x0 = (src.shape[0] - h) // 2, (src.shape[1] - w) // 2
        img = src[y0:y0 + h, x0:x0 + w].copy()
        ts = []
        for _ in range(runs):
            t = time.perf_counter()
            edges = cv2.Canny(img, 50, 150, L2gradient=True)
            ts.append((time.perf_counter() - t) * 1e3)
        ts.sort()
        print(f'{w}x{h} {threads} threads cv::Canny: {int((edges == 255).sum())} edge pixels, '
              f'min {ts[0]:.3f} ms, median {ts[len(ts) // 2]:.3f} ms')


if __name__ == '__main__':
    main()
