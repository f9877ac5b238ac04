import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from sharing.tensorsocket import TensorProducer

"""
TensorSocket's PyTorch producer example as its users run it, with one line changed: the import
(it was `from tensorsocket.producer import TensorProducer`). For a test, the dataset is 200
numbered samples instead of MNIST, the loop runs 3 epochs, and the port comes from argv.
"""

dataset = torch.arange(200)
train_loader = DataLoader(TensorDataset(dataset.float(), dataset), batch_size=8, num_workers=2)

producer = TensorProducer(train_loader, sys.argv[1], sys.argv[2], rubber_band_pct=0.2)

for epoch in range(3):
    for i, _ in enumerate(producer):
        if not i % 100:
            pass

producer.join()
print("Finished")
