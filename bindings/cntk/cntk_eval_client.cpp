// A CNTK 2.7 evaluation client, written as CNTK's CNTKLibraryCPPEvalExamples are: it includes
// CNTKLibrary.h and the standard library only, and compiles unchanged against CNTK's header or
// Loom's. cntk_library_test.cpp runs it on model files CNTK wrote and checks what it computes.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "CNTKLibrary.h"

using namespace CNTK;

namespace {

void PrintOutput(size_t sampleSize, const std::vector<std::vector<float>>& outputBuffer) {
  printf("The batch contains %d sequences.\n", (int)outputBuffer.size());
  for (size_t seqNo = 0; seqNo < outputBuffer.size(); seqNo++) {
    const std::vector<float>& seq = outputBuffer[seqNo];
    if (seq.size() % sampleSize != 0)
      throw std::runtime_error(
          "The number of elements in the sequence is not a multiple of sample size");
    printf("Sequence %d contains %d samples.\n", (int)seqNo, (int)(seq.size() / sampleSize));
    for (size_t i = 0; i < seq.size(); i++)
      printf(i % sampleSize == sampleSize - 1 ? "%f\n" : "%f, ", seq[i]);
  }
}

std::string ToNarrow(const wchar_t* path) {
  char buffer[1024];
  size_t written = ::wcstombs(buffer, path, sizeof buffer);
  if (written == (size_t)-1 || written == sizeof buffer)
    throw std::runtime_error("The file path cannot be converted.");
  return buffer;
}

std::unordered_map<std::string, size_t> BuildVocabIndex(const wchar_t* filePath) {
  std::unordered_map<std::string, size_t> vocab;
  std::ifstream input(ToNarrow(filePath));
  std::string word;
  size_t index = 0;
  while (input >> word) vocab[word] = index++;
  return vocab;
}

std::vector<std::string> BuildSlotIndex(const wchar_t* filePath) {
  std::vector<std::string> slots;
  std::ifstream input(ToNarrow(filePath));
  std::string slot;
  while (input >> slot) slots.push_back(slot);
  return slots;
}

std::vector<std::string> SplitWords(const char* sentence) {
  std::vector<std::string> words;
  std::stringstream inputStream(sentence);
  std::string word;
  while (inputStream >> word) words.push_back(word);
  return words;
}

// The slot of each word: the index of the largest score of each output sample.
std::vector<std::string> PrintSlots(const std::vector<std::string>& words,
                                    const std::vector<float>& slotSeq, size_t outputSampleSize,
                                    const std::vector<std::string>& indexToSlots) {
  if (slotSeq.size() != words.size() * outputSampleSize)
    throw std::runtime_error(
        "The number of input words and the number of output slots do not match");
  std::vector<std::string> slots;
  for (size_t i = 0; i < words.size(); i++) {
    size_t maxIndex = 0;
    for (size_t j = 1; j < outputSampleSize; j++)
      if (slotSeq[i * outputSampleSize + j] > slotSeq[i * outputSampleSize + maxIndex])
        maxIndex = j;
    printf("     %10s ---- %s\n", words[i].c_str(), indexToSlots[maxIndex].c_str());
    slots.push_back(indexToSlots[maxIndex]);
  }
  return slots;
}

}  // namespace

// Evaluates a batch of sampleCount samples (element i of the batch is i % 7 - 3) with the
// model's first argument and its single output.
std::vector<std::vector<float>> EvaluationBatchUsingDense(const wchar_t* modelFile,
                                                          size_t sampleCount,
                                                          const DeviceDescriptor& device) {
  printf("\n===== Evaluate batch of samples using dense format.\n");
  FunctionPtr modelFunc = Function::Load(modelFile, device);
  Variable inputVar = modelFunc->Arguments()[0];
  Variable outputVar = modelFunc->Output();

  std::vector<float> inputData(inputVar.Shape().TotalSize() * sampleCount);
  for (size_t i = 0; i < inputData.size(); ++i) inputData[i] = static_cast<float>(i % 7) - 3.0f;

  ValuePtr inputVal = Value::CreateBatch(inputVar.Shape(), inputData, device);
  std::unordered_map<Variable, ValuePtr> inputDataMap = {{inputVar, inputVal}};
  std::unordered_map<Variable, ValuePtr> outputDataMap = {{outputVar, nullptr}};
  modelFunc->Evaluate(inputDataMap, outputDataMap, device);

  ValuePtr outputVal = outputDataMap[outputVar];
  std::vector<std::vector<float>> outputData;
  outputVal->CopyVariableValueTo(outputVar, outputData);
  PrintOutput(outputVar.Shape().TotalSize(), outputData);
  return outputData;
}

// Evaluates the node named layerName of the model on the input named inputName (a batch of
// sampleCount samples, element i being i % 255 / 255), as CNTK's EvaluateIntermediateLayer.
std::vector<std::vector<float>> EvaluateIntermediateLayer(const wchar_t* modelFile,
                                                          const wchar_t* inputName,
                                                          const wchar_t* layerName,
                                                          size_t sampleCount,
                                                          const DeviceDescriptor& device) {
  printf("\n===== Evaluate intermediate layer =====\n");
  FunctionPtr rootFunc = Function::Load(modelFile, device);
  FunctionPtr layerFunc = rootFunc->FindByName(layerName);
  if (!layerFunc) throw std::runtime_error("The model has no such layer.");
  FunctionPtr modelFunc = AsComposite(layerFunc);

  Variable inputVar;
  for (const Variable& argument : modelFunc->Arguments())
    if (argument.Name() == inputName) inputVar = argument;
  Variable outputVar = modelFunc->Output();

  std::vector<float> inputData(inputVar.Shape().TotalSize() * sampleCount);
  for (size_t i = 0; i < inputData.size(); ++i) inputData[i] = static_cast<float>(i % 255) / 255.0f;

  ValuePtr inputVal = Value::CreateBatch(inputVar.Shape(), inputData, device);
  std::unordered_map<Variable, ValuePtr> inputDataMap = {{inputVar, inputVal}};
  std::unordered_map<Variable, ValuePtr> outputDataMap = {{outputVar, nullptr}};
  modelFunc->Evaluate(inputDataMap, outputDataMap, device);

  std::vector<std::vector<float>> outputData;
  outputDataMap[outputVar]->CopyVariableValueTo(outputVar, outputData);
  PrintOutput(outputVar.Shape().TotalSize(), outputData);
  return outputData;
}

// The ATIS slot tagger on one sentence given as one-hot word indices; slots receives the tags.
std::vector<std::vector<float>> EvaluationSingleSequenceUsingOneHot(
    const wchar_t* modelFile, const wchar_t* vocabularyFile, const wchar_t* labelFile,
    const char* inputSentence, std::vector<std::string>& slots, const DeviceDescriptor& device) {
  printf("\n===== Evaluate single sequence using one-hot vector.\n");
  FunctionPtr modelFunc = Function::Load(modelFile, device);
  std::unordered_map<std::string, size_t> vocabToIndex = BuildVocabIndex(vocabularyFile);
  std::vector<std::string> indexToSlots = BuildSlotIndex(labelFile);

  Variable inputVar = modelFunc->Arguments()[0];
  size_t vocabSize = inputVar.Shape().TotalSize();
  std::vector<std::string> inputWords = SplitWords(inputSentence);
  std::vector<size_t> seqData;
  for (const std::string& word : inputWords) seqData.push_back(vocabToIndex.at(word));

  bool seqStartFlag = true;
  ValuePtr inputVal = Value::CreateSequence<float>(vocabSize, seqData, seqStartFlag, device);
  std::unordered_map<Variable, ValuePtr> inputDataMap = {{inputVar, inputVal}};
  Variable outputVar = modelFunc->Output();
  std::unordered_map<Variable, ValuePtr> outputDataMap = {{outputVar, nullptr}};
  modelFunc->Evaluate(inputDataMap, outputDataMap, device);

  std::vector<std::vector<float>> outputData;
  outputDataMap[outputVar]->CopyVariableValueTo(outputVar, outputData);
  if (outputData.size() != 1)
    throw std::runtime_error("Only one sequence of slots is expected as output.");
  slots = PrintSlots(inputWords, outputData[0], outputVar.Shape().TotalSize(), indexToSlots);
  return outputData;
}

// The same on a batch of sentences of different lengths.
std::vector<std::vector<float>> EvaluationBatchOfSequencesUsingOneHot(
    const wchar_t* modelFile, const wchar_t* vocabularyFile, const wchar_t* labelFile,
    const std::vector<const char*>& inputSentences, std::vector<std::vector<std::string>>& slots,
    const DeviceDescriptor& device) {
  printf("\n===== Evaluate batch of sequences with variable length using one-hot vector.\n");
  FunctionPtr modelFunc = Function::Load(modelFile, device);
  std::unordered_map<std::string, size_t> vocabToIndex = BuildVocabIndex(vocabularyFile);
  std::vector<std::string> indexToSlots = BuildSlotIndex(labelFile);

  Variable inputVar = modelFunc->Arguments()[0];
  size_t vocabSize = inputVar.Shape().TotalSize();
  std::vector<std::vector<std::string>> inputWordsList;
  std::vector<std::vector<size_t>> inputBatch;
  std::vector<bool> seqStartFlagBatch;
  for (const char* sentence : inputSentences) {
    inputWordsList.push_back(SplitWords(sentence));
    std::vector<size_t> seqData;
    for (const std::string& word : inputWordsList.back()) seqData.push_back(vocabToIndex.at(word));
    inputBatch.push_back(seqData);
    seqStartFlagBatch.push_back(true);
  }

  ValuePtr inputVal =
      Value::CreateBatchOfSequences<float>(vocabSize, inputBatch, seqStartFlagBatch, device);
  std::unordered_map<Variable, ValuePtr> inputDataMap = {{inputVar, inputVal}};
  Variable outputVar = modelFunc->Output();
  std::unordered_map<Variable, ValuePtr> outputDataMap = {{outputVar, nullptr}};
  modelFunc->Evaluate(inputDataMap, outputDataMap, device);

  std::vector<std::vector<float>> outputData;
  outputDataMap[outputVar]->CopyVariableValueTo(outputVar, outputData);
  if (outputData.size() != inputBatch.size())
    throw std::runtime_error("The number of sequence in output does not match that in input.");
  printf("The number of sequences in the batch: %d\n", (int)outputData.size());
  slots.clear();
  for (size_t seqno = 0; seqno < outputData.size(); seqno++) {
    printf("Sequence %d:\n", (int)seqno);
    slots.push_back(PrintSlots(inputWordsList[seqno], outputData[seqno],
                               outputVar.Shape().TotalSize(), indexToSlots));
  }
  return outputData;
}

// The same sentence given in CNTK's CSC sparse form.
std::vector<std::vector<float>> EvaluationSingleSequenceUsingSparse(
    const wchar_t* modelFile, const wchar_t* vocabularyFile, const char* inputSentence,
    const DeviceDescriptor& device) {
  printf("\n===== Evaluate single sequence using sparse input.\n");
  FunctionPtr modelFunc = Function::Load(modelFile, device);
  std::unordered_map<std::string, size_t> vocabToIndex = BuildVocabIndex(vocabularyFile);
  Variable inputVar = modelFunc->Arguments()[0];
  size_t vocabSize = inputVar.Shape().TotalSize();

  std::vector<std::string> inputWords = SplitWords(inputSentence);
  size_t seqLen = inputWords.size();
  std::vector<SparseIndexType> colStarts;
  std::vector<SparseIndexType> rowIndices;
  std::vector<float> nonZeroValues;
  for (size_t count = 0; count < seqLen; count++) {
    nonZeroValues.push_back(1.0f);
    rowIndices.push_back(static_cast<SparseIndexType>(vocabToIndex.at(inputWords[count])));
    colStarts.push_back(static_cast<SparseIndexType>(count));
  }
  colStarts.push_back(static_cast<SparseIndexType>(seqLen));

  ValuePtr inputVal =
      Value::CreateSequence<float>(vocabSize, seqLen, colStarts.data(), rowIndices.data(),
                                   nonZeroValues.data(), nonZeroValues.size(), device);
  std::unordered_map<Variable, ValuePtr> inputDataMap = {{inputVar, inputVal}};
  Variable outputVar = modelFunc->Output();
  std::unordered_map<Variable, ValuePtr> outputDataMap = {{outputVar, nullptr}};
  modelFunc->Evaluate(inputDataMap, outputDataMap, device);

  std::vector<std::vector<float>> outputData;
  outputDataMap[outputVar]->CopyVariableValueTo(outputVar, outputData);
  return outputData;
}

// threadCount threads, each evaluating its own Share-clone of the model on one one-hot
// sequence at once, as CNTK's ParallelEvaluationExample; the outputs by thread.
std::vector<std::vector<std::vector<float>>> ParallelEvaluationExample(
    const wchar_t* modelFile, const std::vector<size_t>& seqData, size_t threadCount,
    const DeviceDescriptor& device) {
  printf("\n===== Evaluate multiple requests in parallel.\n");
  FunctionPtr modelFunc = Function::Load(modelFile, device);
  std::vector<std::vector<std::vector<float>>> outputs(threadCount);
  std::vector<std::exception_ptr> errors(threadCount);
  std::vector<std::thread> threadList(threadCount);
  for (size_t th = 0; th < threadCount; ++th) {
    FunctionPtr evalInstance = modelFunc->Clone(ParameterCloningMethod::Share);
    threadList[th] = std::thread([evalInstance, &seqData, &outputs, &errors, th, device] {
      try {
        Variable inputVar = evalInstance->Arguments()[0];
        Variable outputVar = evalInstance->Output();
        ValuePtr inputVal =
            Value::CreateSequence<float>(inputVar.Shape().TotalSize(), seqData, device);
        std::unordered_map<Variable, ValuePtr> inputDataMap = {{inputVar, inputVal}};
        std::unordered_map<Variable, ValuePtr> outputDataMap = {{outputVar, nullptr}};
        evalInstance->Evaluate(inputDataMap, outputDataMap, device);
        outputDataMap[outputVar]->CopyVariableValueTo(outputVar, outputs[th]);
      } catch (...) {
        errors[th] = std::current_exception();
      }
    });
  }
  for (size_t th = 0; th < threadCount; ++th) {
    threadList[th].join();
    printf("thread %d joined.\n", (int)th);
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  return outputs;
}
