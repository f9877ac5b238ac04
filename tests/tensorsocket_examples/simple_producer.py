import time

import torch

from sharing.tensorsocket import TensorProducer

"""
TensorSocket's simple producer example as its users run it, with one line changed: the import
(it was `from tensorsocket.producer import TensorProducer`). For a test, the loader is shorter
and its tensors smaller; the loop is the example's.
"""


class DummyLoader:
    def __init__(self, length=24):
        self.length = length
        self.id = 0
        self.batch_size = 8

    def __len__(self):
        return self.length

    def __iter__(self):
        self.id = 0
        return self

    def __next__(self):
        a, b = (
            self.id * torch.ones((self.batch_size, 10, 20)),
            self.id * torch.ones((self.batch_size,)),
        )

        self.id += 1
        return a, b


data_loader = DummyLoader()


producer = TensorProducer(data_loader, "5556", "5557", rubber_band_pct=0.02)

for epoch in range(10):
    print("Epoch:", epoch)
    for i, _ in enumerate(producer):
        time.sleep(0.001)
        if not i % 100:
            pass
producer.join()
print("Finished")
