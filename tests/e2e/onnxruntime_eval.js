// Evaluates an ONNX model with onnxruntime-node (an independent runtime) for onnx_test.py:
//   node onnxruntime_eval.js NODE_MODULES MODEL INPUT_FILE SHAPE OUTPUT_FILE [LENGTHS_FILE]
// INPUT_FILE holds raw float32 values of SHAPE (as 4,28,28) for the model's first input; the
// first output is written to OUTPUT_FILE as raw float32. LENGTHS_FILE (raw int32, one per
// sequence) feeds a sequence model's second input, its sequences' lengths.
const fs = require("fs");
const path = require("path");
const [nodeModules, model, inputFile, shape, outputFile, lengthsFile] = process.argv.slice(2);
const ort = require(path.join(nodeModules, "onnxruntime-node"));

(async () => {
  const session = await ort.InferenceSession.create(model);
  const bytes = fs.readFileSync(inputFile);
  const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const dims = shape.split(",").map(Number);
  const feeds = {[session.inputNames[0]]: new ort.Tensor("float32", data, dims)};
  if (lengthsFile) {
    const lb = fs.readFileSync(lengthsFile);
    const lengths = new Int32Array(lb.buffer, lb.byteOffset, lb.length / 4);
    feeds[session.inputNames[1]] = new ort.Tensor("int32", lengths, [lengths.length]);
  }
  const results = await session.run(feeds);
  const out = results[session.outputNames[0]].data;
  fs.writeFileSync(outputFile, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
})().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
