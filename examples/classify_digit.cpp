// Seed 002's deployment: load the model mnist_convnet saved, call it on one test image like a
// function, and print the class with the highest score.
//
//   classify_digit [--model PATH (default mnist.cmf)] [--image N (default 8345)]
//                  [--data FOLDER (default /usr/share/datasets/fashion-mnist)]
#include <cstdio>
#include <string>

#include "examples/fashion_mnist.h"

using namespace loom;

int main(int argc, char** argv) {
  std::string model_path = "mnist.cmf", folder = examples::kFashionMnistFolder;
  size_t index = 8345;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") {
      model_path = value;
    } else if (flag == "--image") {
      index = std::stoul(value);
    } else if (flag == "--data") {
      folder = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  examples::MnistData data = examples::load_mnist(folder, 0, 0);

  // At program start, load the model.
  Function classify_digit = load_model(model_path);
  // To apply the model, just call it.
  NDArrayView image_input = data.X_test[index];  // one test image, [28,28]
  Value scores = classify_digit(image_input);
  size_t image_class = scores[0].argmax();  // the highest-scoring class
  std::printf("Recognized as: %zu (label %zu)\n", image_class, data.Y_test[index].argmax());
  return 0;
}
