"""CNTK's sequence-classification data (examples/sequence_classification.cpp): Embedding(50),
Recurrence(LSTM(25)), sequence::last, Dense(5) trained for 20 sweeps over CNTK's Train.ctf read
as sequences; the training error must fall well below chance and below half the error of always
guessing the most frequent class."""
import os
import sys

from example import expect, matching, run

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared",
                    "cntk-testdata", "Tests", "EndToEndTests", "Text", "SequenceClassification",
                    "Data", "Train.ctf")
lines = run("sequence_classification", DATA)
expect("Composite(x: Sequence[SparseTensor[2000]]) -> Tensor[5]" in lines,
       "the model does not print as a sequence classifier")
epoch = matching(lines, r"Finished Epoch\[1\]: loss = (\d+\.\d+) \* (\d+), metric = .*")
expect(len(epoch) == 1 and epoch[0][2] == str(20 * 1247),
       "expected one training summary over 20 sweeps of 1,247 sequences")
result = matching(lines, r"Training error over 1247 sequences: (\d+\.\d\d)% \(chance 80\.00%, "
                         r"most frequent class (\d+\.\d\d)%\)")
expect(len(result) == 1, "no training error line")
error, majority = float(result[0][1]), float(result[0][2])
expect(majority == 44.67, f"the most frequent class is not 690 of 1247 ({majority})")
expect(error < 15, f"training error {error}% is not well below chance")
expect("Well below chance" in lines, "the program did not find its error well below chance")
print(f"sequence_classification: training error {error}%, 1 passed, 0 failed")
