// A DBoW2 vocabulary for ORB-SLAM3, trained the way its ORBvoc.txt was (DBoW2's k-means++
// tree, TF-IDF, L1 score) with ORB-SLAM3's own DBoW2 and ORBextractor, but from the images we
// ship, and seeded: DBoW2 seeds k-means++ from the clock (DUtils::Random::SeedRandOnce()),
// so the seed is set first and the same images give the same file on every run. Results
// with it are not comparable with published ORB-SLAM3 numbers (trained on other images);
// comparisons between two front-ends with the same vocabulary are (docs/slam.md).
//
//   train_vocabulary OUT.txt SEED K L NFEATURES IMAGE...
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "ORBVocabulary.h"
#include "ORBextractor.h"
#include "Thirdparty/DBoW2/DUtils/Random.h"

int main(int argc, char** argv) {
    if (argc < 7) {
        std::fprintf(stderr, "usage: %s OUT.txt SEED K L NFEATURES IMAGE...\n", argv[0]);
        return 2;
    }
    DUtils::Random::SeedRandOnce(std::atoi(argv[2]));
    const int k = std::atoi(argv[3]), levels = std::atoi(argv[4]), nfeatures = std::atoi(argv[5]);
    ORB_SLAM3::ORBextractor extractor(nfeatures, 1.2f, 8, 20, 7);
    std::vector<std::vector<cv::Mat>> features;
    std::vector<int> lapping = {0, 0};
    size_t total = 0;
    for (int a = 6; a < argc; ++a) {
        cv::Mat im = cv::imread(argv[a], cv::IMREAD_GRAYSCALE);
        if (im.empty()) {
            std::fprintf(stderr, "cannot read %s\n", argv[a]);
            return 1;
        }
        std::vector<cv::KeyPoint> kps;
        cv::Mat desc;
        extractor(im, cv::Mat(), kps, desc, lapping);
        features.emplace_back();
        for (int r = 0; r < desc.rows; ++r) features.back().push_back(desc.row(r).clone());
        total += desc.rows;
    }
    ORB_SLAM3::ORBVocabulary voc(k, levels, DBoW2::TF_IDF, DBoW2::L1_NORM);
    voc.create(features);
    voc.saveToTextFile(argv[1]);
    std::fprintf(stderr, "vocabulary: %u words from %zu descriptors of %zu images (k %d, L %d)\n", voc.size(),
                 total, features.size(), k, levels);
    return 0;
}
