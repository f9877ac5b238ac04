import time

from sharing.tensorsocket import TensorConsumer

"""
TensorSocket's simple consumer example as its users run it, with one line changed: the import
(it was `from tensorsocket.consumer import TensorConsumer`).
"""

consumer = TensorConsumer("5556", "5557", batch_size=16)
for epoch in range(10):
    print("Epoch:", epoch)
    for i, batch in enumerate(consumer):
        (inputs, labels) = batch
        if labels != None:
            if True:
                print(f"I:{i:0>7} -", labels[0], consumer.epoch, len(labels))
                time.sleep(0.02)
                pass
        else:
            print("Waiting ...")

print("Finished")
