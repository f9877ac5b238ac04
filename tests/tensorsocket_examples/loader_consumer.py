import sys
import time

from sharing.tensorsocket import TensorConsumer

"""
A consumer of TensorSocket's examples as its users run it, with one line changed: the import
(it was `from tensorsocket.consumer import TensorConsumer`). It trains 3 epochs with a 20 ms
step and prints, per epoch, how many samples it got and how many distinct ones.
"""

consumer = TensorConsumer(sys.argv[1], sys.argv[2], batch_size=int(sys.argv[3]))
for epoch in range(3):
    seen = []
    for i, batch in enumerate(consumer):
        (inputs, labels) = batch
        seen.extend(labels.tolist())
        time.sleep(0.02)
    print(f"Epoch {epoch}: {len(seen)} samples, {len(set(seen))} distinct, {min(seen)}-{max(seen)}")

print("Finished")
