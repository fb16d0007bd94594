// The CNTK C++ way of tests/e2e/five_ways_test.py, written as CNTK 2.7's evaluation examples
// are (CNTKLibrary.h and the standard library only): MODEL IMAGES.f32 evaluates the model's
// "features" argument on the images (784 floats each) and prints output "ol.z" as hexadecimal
// float32 bit patterns.
#include <CNTKLibrary.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL IMAGES.f32\n";
    return 2;
  }
  try {
    std::ifstream file(argv[2], std::ios::binary);
    std::vector<float> images;
    for (float x; file.read(reinterpret_cast<char*>(&x), sizeof x);) images.push_back(x);

    const CNTK::DeviceDescriptor device = CNTK::DeviceDescriptor::CPUDevice();
    const std::string path = argv[1];
    CNTK::FunctionPtr modelFunc =
        CNTK::Function::Load(std::wstring(path.begin(), path.end()), device);
    CNTK::Variable features;
    for (const CNTK::Variable& a : modelFunc->Arguments())
      if (a.Name() == L"features") features = a;
    CNTK::Variable scores = modelFunc->FindByName(L"ol.z")->Output();

    std::unordered_map<CNTK::Variable, CNTK::ValuePtr> inputs = {
        {features, CNTK::Value::CreateBatch(features.Shape(), images, device)}};
    std::unordered_map<CNTK::Variable, CNTK::ValuePtr> outputs = {{scores, nullptr}};
    modelFunc->Evaluate(inputs, outputs, device);

    std::vector<std::vector<float>> result;
    outputs[scores]->CopyVariableValueTo(scores, result);
    for (const std::vector<float>& sample : result)
      for (float x : sample) {
        uint32_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        std::printf("%08x ", bits);
      }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
