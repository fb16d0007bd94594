# torchvision's ImageFolder under a DataLoader: bench_image_reader's peer. The same transforms
# as the Loom side: RandomCrop of 0.875 of the shorter side (240 -> 210), Resize to 224 x 224,
# RandomHorizontalFlip, ToTensor (float CHW), batches of 64, one shuffled epoch per repeat, at
# each worker count; prints the best as images_per_second=.
#
#   /usr/bin/python3 bench/image_reader_torch.py ROOT REPEATS WORKERS(a,b,...)
import sys
import time

import torch
import torchvision
from torchvision import transforms


def epoch(dataset, workers):
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True,
                                         num_workers=workers)
    start = time.perf_counter()
    images = 0
    for x, _ in loader:
        images += x.shape[0]
    return images / (time.perf_counter() - start)


def main():
    root, repeats = sys.argv[1], int(sys.argv[2])
    workers = [int(w) for w in sys.argv[3].split(",")]
    torch.set_num_threads(1)
    dataset = torchvision.datasets.ImageFolder(root, transforms.Compose([
        transforms.RandomCrop(210),
        transforms.Resize((224, 224)),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
    ]))
    best, best_workers = 0.0, 0
    for w in workers:
        rate = max(epoch(dataset, w) for _ in range(repeats))
        print(f"{w} workers: {rate:.0f} images/s")
        if rate > best:
            best, best_workers = rate, w
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"best with {best_workers} workers")
    print(f"images_per_second={best:.1f}")


if __name__ == "__main__":
    main()
