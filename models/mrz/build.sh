#!/bin/sh
# Rebuilds the MRZ glyph model (models/mrz/mrz-ocrb.onnx) and the reader's test fixtures
# (test/fixtures/mrz/) from nothing but Debian packages and this repository. Build time only:
#   apt-get install -y python3-torch python3-numpy python3-onnx   (the OCR-B fonts ship in models/mrz/fonts)
# Training data goes to $MRZ_TRAINING_DIR (default /tmp/mrz-training), outside the repository.
set -eu
cd "$(dirname "$0")/../.."
DATA=${MRZ_TRAINING_DIR:-/tmp/mrz-training}
PYTHON=${PYTHON:-/usr/bin/python3}
node --import tsx models/mrz/render-training-data.ts "$DATA" 7000 700
"$PYTHON" models/mrz/train.py "$DATA" models/mrz/mrz-ocrb.onnx 8
node --import tsx models/mrz/render-fixtures.ts
