"""Trains the OCR-B MRZ glyph classifier on crops from render-training-data.ts and exports it to ONNX.

    python3 models/mrz/train.py DATA_DIR OUT.onnx [EPOCHS]

CPU only (Debian's python3-torch); about ten minutes on two cores. Prints held-out accuracy and the
most frequent confusions, which go into CARD.md.
"""
import json
import os
import sys
import time
from collections import Counter

import numpy as np
import torch
from torch import nn

torch.manual_seed(7)
np.random.seed(7)
torch.set_num_threads(max(1, os.cpu_count() or 1))


def load(data_dir, name, height, width):
    x = np.fromfile(os.path.join(data_dir, f"{name}.x.bin"), dtype=np.uint8).reshape(-1, 1, height, width)
    y = np.fromfile(os.path.join(data_dir, f"{name}.y.bin"), dtype=np.uint8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


class GlyphNet(nn.Module):
    def __init__(self, classes):
        super().__init__()

        def block(inputs, outputs):
            return [nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU(inplace=True)]

        self.features = nn.Sequential(
            *block(1, 16), nn.MaxPool2d(2),
            *block(16, 32), nn.MaxPool2d(2),
            *block(32, 64), *block(64, 64), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 4 * 3, 128), nn.ReLU(inplace=True), nn.Dropout(0.3), nn.Linear(128, classes))

    def forward(self, glyphs):
        return self.head(self.features(glyphs))


def shift(batch):
    """One-pixel random translations on top of the renderer's jitter: cheap, and the reader's centres wobble."""
    dx, dy = np.random.randint(-1, 2, size=2)
    return torch.roll(batch, shifts=(int(dy), int(dx)), dims=(2, 3))


def evaluate(model, x, y):
    model.eval()
    predictions = []
    with torch.no_grad():
        for start in range(0, len(x), 2048):
            predictions.append(model(x[start:start + 2048].float() / 255).argmax(1))
    return torch.cat(predictions)


def main():
    data_dir, out_path = sys.argv[1], sys.argv[2]
    epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 14
    meta = json.load(open(os.path.join(data_dir, "meta.json")))
    height, width, classes = meta["height"], meta["width"], meta["classes"]
    train_x, train_y = load(data_dir, "train", height, width)
    validation_x, validation_y = load(data_dir, "validation", height, width)
    model = GlyphNet(len(classes))
    batch_size = 256
    steps = epochs * ((len(train_x) + batch_size - 1) // batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    started = time.time()
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(train_x))
        total = 0.0
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            batch = shift(train_x[index].float() / 255)
            loss = loss_function(model(batch), train_y[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(index)
        accuracy = (evaluate(model, validation_x, validation_y) == validation_y).float().mean().item()
        print(f"epoch {epoch + 1}/{epochs} loss {total / len(train_x):.4f} held-out accuracy {accuracy:.4f} ({time.time() - started:.0f} s)", flush=True)

    predicted = evaluate(model, validation_x, validation_y)
    errors = Counter((classes[t], classes[p]) for t, p in zip(validation_y.tolist(), predicted.tolist()) if t != p)
    print(f"held-out glyphs: {len(validation_y)}, errors: {sum(errors.values())}, accuracy {(predicted == validation_y).float().mean().item():.4f}")
    print("top confusions (true -> read):", ", ".join(f"{t}->{p} x{n}" for (t, p), n in errors.most_common(12)))

    model.eval()
    torch.onnx.export(
        model,
        torch.zeros(1, 1, height, width),
        out_path,
        input_names=["glyphs"],
        output_names=["logits"],
        dynamic_axes={"glyphs": {0: "n"}, "logits": {0: "n"}},
        opset_version=13,
        do_constant_folding=True,
    )
    print(f"wrote {out_path} ({os.path.getsize(out_path)} bytes), training took {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
