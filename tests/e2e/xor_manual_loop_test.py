"""Seed 000's manual loop: its progress lines, the loss falling below 0.01 well before 800
samples, and a small error on the evaluation pass."""
from example import expect, matching, run

out = run("xor_manual_loop")
expect(out[0] == "Learning rate per sample: 0.1", "first line is not the learning rate")
mb = matching(out, r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* 40, "
                   r"metric = (\d+\.\d\d)% \* 40;")
expect([(int(m[1]), int(m[2])) for m in mb] == [(i * 10 + 1, i * 10 + 10) for i in range(20)],
       "expected 20 progress lines (800 samples, minibatch 4, freq 10)")
expect(out[1] == mb[0][0] and out[1].startswith(" Minibatch[   1-  10]: loss = "),
       "first progress line misformatted")
losses = [float(m[3]) for m in mb]
first_below = next((i for i, l in enumerate(losses) if l < 0.01), None)
expect(first_below is not None and first_below < 15, f"loss never fell below 0.01 early: {losses}")
err = matching(out, r"Error (\d+\.\d+)")
expect(len(err) == 1 and float(err[0][1]) < 0.05, "evaluation error is not small")
print("xor_manual_loop: 1 passed, 0 failed")
