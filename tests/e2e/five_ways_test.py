"""One model, five ways: CNTK's v1 MNIST classifier (v1_01_OneHidden.dnn, output ol.z) on the
same four images, evaluated through the C API (a C program against loom_c.h), CNTK's C++ API
(bindings/cntk/five_ways_client.cpp against CNTKLibrary.h), the C# client (Mono), the Java
client (JNI), Loom's Python package and `loom eval`: at one thread the scores must be bitwise
equal. A way whose tool (cc, mcs and mono, java) is missing is skipped, saying so; a way whose
tool is here but whose build output is not fails."""
import os
import shutil
import subprocess
import sys

os.environ["OMP_NUM_THREADS"] = "1"  # before Loom's libraries start their threads
import numpy as np  # noqa: E402

from example import expect, fail  # noqa: E402

build_dir, work_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
source_dir = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
models = os.path.normpath(os.path.join(source_dir, "..", "shared", "cntk-models"))
model = os.path.join(models, "v1_01_OneHidden.dnn")
if not os.path.exists(model):
    print(f"SKIPPED: {model} is not here")
    sys.exit(0)
shutil.rmtree(work_dir, ignore_errors=True)
os.makedirs(work_dir)
os.chdir(work_dir)
images = np.random.RandomState(0).rand(4, 784).astype(np.float32)
images.tofile("images.f32")  # what the C, C# and Java programs read (native byte order)
skipped = []


def run(*command, env=None):
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        fail(f"{' '.join(command)} exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def scores_from_bits(text):
    """The 40 scores a program printed as hexadecimal float32 bit patterns."""
    return np.array([int(w, 16) for w in text.split()], dtype=np.uint32).view(np.float32)


def tool(*names):
    """Whether every tool is on PATH; a skip message otherwise."""
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        skipped.append(f"{'/'.join(names)} (no {', '.join(missing)})")
    return not missing


def idx(name, array):
    """A float32 IDX file (big-endian, dimensions first) for `loom eval`."""
    with open(name, "wb") as f:
        f.write(bytes([0, 0, 0x0D, array.ndim]))
        f.write(np.array(array.shape, dtype=">i4").tobytes())
        f.write(array.astype(">f4").tobytes())
    return name


def loom_eval():
    labels = np.eye(10, dtype=np.float32)[:4]  # loom eval feeds every argument
    run(os.path.join(build_dir, "tools", "loom"), "eval", model, "--data",
        "features=" + idx("features.idx", images), "--data", "labels=" + idx("labels.idx", labels),
        "--output", "out.ctf", "--minibatch-size", "4")
    scores = []
    for line in open("out.ctf"):
        for field in line.split("|")[1:]:
            name, *values = field.split()
            if name == "ol.z":
                scores += [np.float32(v) for v in values]
    return np.array(scores, dtype=np.float32)


def python():
    sys.path.insert(0, os.path.join(build_dir, "python"))
    import loom
    f = loom.load_model(model)
    features = next(a for a in f.arguments if a.name == "features")
    scores = next(o for o in f.outputs if o.name == "ol.z")
    return np.concatenate(f.eval({features: [image[None] for image in images]}, outputs=[scores]),
                          axis=None)


C_CLIENT = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom_c.h"

static void check(loom_status status) {
  if (status != LOOM_OK) { fprintf(stderr, "%s\n", loom_last_error_message()); exit(1); }
}

int main(int argc, char** argv) {
  static float images[4 * 784], scores[40];
  FILE* f = fopen(argv[2], "rb");
  if (!f || fread(images, sizeof(float), 4 * 784, f) != 4 * 784) return 1;
  fclose(f);
  loom_model* model = NULL;
  loom_value* input = NULL;
  loom_value* output = NULL;
  const int64_t shape[1] = {784}, lengths[4] = {1, 1, 1, 1};
  const char* inputs[1] = {"features"};
  const char* outputs[1] = {"ol.z"};
  check(loom_model_load(argv[1], &model));
  check(loom_value_create_dense_sequences(LOOM_FLOAT32, shape, 1, 4, lengths, images, 4 * 784,
                                          &input));
  check(loom_model_evaluate(model, 1, inputs, &input, 1, outputs, &output));
  check(loom_value_copy_data(output, LOOM_FLOAT32, scores, 40));
  for (int i = 0; i < 40; ++i) {
    unsigned int bits;
    memcpy(&bits, &scores[i], sizeof bits);
    printf("%08x ", bits);
  }
  check(loom_value_free(output));
  check(loom_value_free(input));
  check(loom_model_free(model));
  return 0;
}
"""


def c():
    library = os.path.join(build_dir, "bindings", "c")
    with open("client.c", "w") as f:
        f.write(C_CLIENT)
    run("cc", "-std=c99", "-Wall", "-Werror", "-I", os.path.join(source_dir, "bindings", "c"),
        "client.c", "-o", "client_c", "-L", library, "-lloom_c", "-Wl,-rpath," + library)
    return scores_from_bits(run("./client_c", model, "images.f32"))


CSHARP_CLIENT = r"""
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using CNTK;

static class Client
{
    static void Main(string[] args)
    {
        byte[] bytes = File.ReadAllBytes(args[1]);
        float[] images = new float[bytes.Length / 4];
        Buffer.BlockCopy(bytes, 0, images, 0, bytes.Length);
        DeviceDescriptor device = DeviceDescriptor.CPUDevice;
        using (Function modelFunc = Function.Load(args[0], device))
        {
            Variable features = modelFunc.Arguments.Single(a => a.Name == "features");
            Variable scores = modelFunc.Outputs.Single(o => o.Name == "ol.z");
            var inputs = new Dictionary<Variable, Value> { { features, Value.CreateBatch(features.Shape, images, device) } };
            var outputs = new Dictionary<Variable, Value> { { scores, null } };
            modelFunc.Evaluate(inputs, outputs, device);
            foreach (IList<float> sample in outputs[scores].GetDenseData<float>(scores))
                foreach (float x in sample)
                    Console.Write(BitConverter.ToUInt32(BitConverter.GetBytes(x), 0).ToString("x8") + " ");
        }
    }
}
"""


def csharp():
    directory = os.path.join(build_dir, "bindings", "csharp")
    assembly = os.path.join(directory, "Cntk.Core.Managed.dll")
    expect(os.path.exists(assembly), f"mcs is here but {assembly} is not: build target cntk_csharp")
    with open("Client.cs", "w") as f:
        f.write(CSHARP_CLIENT)
    run("mcs", "-nologo", "-out:Client.exe", "-r:" + assembly, "Client.cs")
    shutil.copy(assembly, ".")  # mono looks for the assembly beside the program
    return scores_from_bits(run("mono", "Client.exe", model, "images.f32",
                                env={"LD_LIBRARY_PATH": os.path.join(build_dir, "bindings", "c")}))


JAVA_CLIENT = r"""
import com.microsoft.CNTK.*;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;

public class Client {
  public static void main(String[] args) throws Exception {
    ByteBuffer bytes = ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[1])))
                           .order(ByteOrder.nativeOrder());
    FloatVector images = new FloatVector();
    while (bytes.hasRemaining()) images.add(bytes.getFloat());
    DeviceDescriptor device = DeviceDescriptor.getCPUDevice();
    try (Function modelFunc = Function.load(args[0], device)) {
      Variable features = null;
      for (Variable a : modelFunc.getArguments())
        if (a.getName().equals("features")) features = a;
      Variable scores = modelFunc.findByName("ol.z").getOutput();
      UnorderedMapVariableValuePtr inputs = new UnorderedMapVariableValuePtr();
      UnorderedMapVariableValuePtr outputs = new UnorderedMapVariableValuePtr();
      inputs.add(features, Value.createBatchFloat(features.getShape(), images, device));
      outputs.add(scores, null);
      modelFunc.evaluate(inputs, outputs, device);
      FloatVectorVector result = new FloatVectorVector();
      outputs.getitem(scores).copyVariableValueToFloat(scores, result);
      StringBuilder out = new StringBuilder();
      for (int s = 0; s < result.size(); ++s)
        for (int i = 0; i < result.get(s).size(); ++i)
          out.append(String.format("%08x ", Float.floatToRawIntBits(result.get(s).get(i))));
      System.out.print(out);
    }
  }
}
"""


def java():
    directory = os.path.join(build_dir, "bindings", "java")
    jar = os.path.join(directory, "cntk.jar")
    expect(os.path.exists(jar), f"java is here but {jar} is not: build target cntk_java")
    with open("Client.java", "w") as f:
        f.write(JAVA_CLIENT)
    # Java 11's single-file launch compiles and runs the program in one step.
    return scores_from_bits(run("java", "-Djava.library.path=" + directory, "-cp", jar,
                                "Client.java", model, "images.f32"))


reference = loom_eval()
expect(reference.size == 40, f"loom eval gave {reference.size} scores, not 4 x 10")
results = {"loom eval": reference}
if os.path.isdir(os.path.join(build_dir, "python", "loom")):
    results["Python"] = python()
else:
    skipped.append("Python (the build has no Python package)")
if tool("cc"):
    results["C"] = c()
results["CNTK C++"] = scores_from_bits(
    run(os.path.join(build_dir, "bindings", "cntk", "cntk_five_ways_client"), model, "images.f32"))
if tool("mcs", "mono"):
    results["C#"] = csharp()
if tool("java"):
    results["Java"] = java()

for way, scores in results.items():
    same = scores.shape == reference.shape and (scores.view(np.uint32) ==
                                               reference.view(np.uint32)).all()
    print(f"{way:10} {' '.join(f'{x:.6g}' for x in scores[:5])} ...  "
          f"{'bitwise equal to loom eval' if same else 'DIFFERS'}")
    expect(same, f"{way}'s scores differ from loom eval's:\n{scores}\n{reference}")
for s in skipped:
    print("skipped:", s)
print(f"{len(results)} ways agree bitwise")
