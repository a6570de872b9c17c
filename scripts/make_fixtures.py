#!/usr/bin/env python3
"""Rebuilds tests/data/ from its public sources (see tests/data/LICENSES.md).

Needs: apt-get (to download the opencv-doc .deb, not install it) and scikit-image.
Run: .venv-py/bin/python scripts/make_fixtures.py
"""
import glob
import os
import subprocess
import tempfile

import cv2
import skimage.data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data")
OPENCV_FILES = ["graf1.png", "graf3.png", "H1to3p.xml", "building.jpg", "box.png",
                "left01.jpg", "basketball1.png"]


def opencv_doc(tmp):
    subprocess.run(["apt-get", "download", "opencv-doc"], cwd=tmp, check=True)
    deb = glob.glob(os.path.join(tmp, "opencv-doc_*.deb"))[0]
    pattern = "./usr/share/doc/opencv-doc/examples/data/*"
    tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", tmp, "--wildcards", pattern], stdin=tar.stdout, check=True)
    return os.path.join(tmp, "usr/share/doc/opencv-doc/examples/data")


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = opencv_doc(tmp)
        for name in OPENCV_FILES:
            stem, ext = os.path.splitext(name)
            if ext == ".xml":
                with open(os.path.join(src, name)) as f, open(os.path.join(OUT, name), "w") as g:
                    g.write(f.read())
                continue
            img = cv2.imread(os.path.join(src, name), cv2.IMREAD_UNCHANGED)
            # PNG keeps the decoded pixels exact (JPEG decoders may differ by a grey level).
            cv2.imwrite(os.path.join(OUT, stem + ".png"), img)
    # scikit-image photos (RGB arrays -> BGR for cv2.imwrite).
    for name in ["camera", "astronaut", "brick"]:
        img = getattr(skimage.data, name)()
        if img.ndim == 3:
            img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
        cv2.imwrite(os.path.join(OUT, name + ".png"), img)
    # An odd-sized crop exercises odd widths/heights in every stage.
    coffee = cv2.cvtColor(skimage.data.coffee(), cv2.COLOR_RGB2BGR)[40:339, 50:451]
    cv2.imwrite(os.path.join(OUT, "coffee_odd.png"), coffee)
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == "__main__":
    main()
