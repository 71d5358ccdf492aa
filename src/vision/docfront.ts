/**
 * readDocumentFront: photograph of a document's front in, what the pipeline saw out: the document
 * found and straightened, the text lines, the identity fields, and the portrait (a face, cut out as
 * a JPEG to serve as the reference for a later selfie).
 */
import { straightenDocument } from './document.ts';
import { boxTuple, DEFAULT_MAX_PIXELS, decodeImage, encodeJpeg, rotateRaster, tenths, warp, type Box, type Raster } from './image.ts';
import { detectFaces, type Face } from './faces.ts';
import { extractFields, type DocumentFields } from './fields.ts';
import { detectText, recognizeText, upsideDownProbability, type TextLine } from './ocr.ts';

/** Photographs are read at this long side at most; document text stays well legible. */
const READ_SIDE = 1600;
/** The detector's long side: PP-OCR's default, a multiple of 32. */
const TEXT_DETECTION_SIDE = 960;
/**
 * Lines in the lower half at least this many times longer than high are machine-readable zones (an
 * MRZ line is 30-44 characters without spaces; printed fields are far shorter). They are the widest
 * and so the costliest lines to recognise, and no field is taken from them (the MRZ has its own
 * reader), so they are not read.
 */
const MRZ_ASPECT = 20;
/** Below this many fields the text is not taken as read (a photo of something else, a blurred card). */
const MIN_FIELDS = 2;
/** The portrait kept is the face box grown by this factor (hair, chin and ears, as on the document). */
const PORTRAIT_MARGIN = 1.8;

export interface DocumentFrontResult {
  /** Enough identity fields were read for the text to count as read. */
  text_read: boolean;
  fields: DocumentFields;
  lines: { text: string; confidence: number; box: [number, number, number, number] }[];
  /**
   * How the document was found and straightened. `corners` are in the photograph as read (scaled so
   * its long side is at most 1600 px); `rotation` is the turn (degrees, clockwise) applied after
   * straightening to make the text upright (an outline found upright on its side is already turned
   * to landscape by the straightening).
   */
  document: { method: 'outline' | 'deskew' | 'none'; corners: { x: number; y: number }[] | null; angle: number; rotation: 0 | 90 | 180 | 270; width: number; height: number };
  face_found: boolean;
  /** The portrait's box in the straightened document, and the detector's score. */
  face: { box: [number, number, number, number]; score: number } | null;
  timings: { decode_ms: number; straighten_ms: number; text_detection_ms: number; text_recognition_ms: number; fields_ms: number; face_ms: number; total_ms: number };
}

/** Portraits are kept at least this wide, so a small one can still be read as a reference. */
const PORTRAIT_MIN_WIDTH = 240;

function portraitCrop(image: Raster, face: Face): Raster {
  const side = Math.max(1, face.box.width, face.box.height) * PORTRAIT_MARGIN;
  const cx = face.box.x + face.box.width / 2;
  const cy = face.box.y + face.box.height / 2;
  const width = Math.max(1, Math.min(side, image.width));
  const height = Math.max(1, Math.min(side * 1.25, image.height));
  const x0 = Math.max(0, Math.min(image.width - width, cx - width / 2));
  const y0 = Math.max(0, Math.min(image.height - height, cy - height / 2));
  const scale = Math.min(1, width / PORTRAIT_MIN_WIDTH);
  return warp(image, [scale, 0, x0, 0, scale, y0, 0, 0, 1], Math.round(width / scale), Math.round(height / scale));
}

/** Above this the text is taken to be upside down. */
const UPSIDE_DOWN = 0.6;

/** Boxes of vertical text (a document on its side) outnumber horizontal ones at least two to one. */
function mostlyVertical(boxes: readonly Box[]): boolean {
  const vertical = boxes.filter((box) => box.height > 1.5 * box.width).length;
  const horizontal = boxes.filter((box) => box.width > 1.5 * box.height).length;
  return vertical >= 3 && vertical > 2 * horizontal;
}

/**
 * Finds the text and turns the document so it reads upright: a quarter turn when the lines run
 * vertically (and the text detected again), a half turn when the direction classifier finds them
 * upside down (the boxes turned with the image).
 */
async function uprightText(image: Raster): Promise<{ document: Raster; boxes: Box[]; rotation: 0 | 90 | 180 | 270 }> {
  let document = image;
  let boxes = await detectText(document, TEXT_DETECTION_SIDE);
  let rotation: 0 | 90 | 180 | 270 = 0;
  if (mostlyVertical(boxes)) {
    // Detected again: the detector misses short vertical runs (a lone "F" under "Sex").
    document = rotateRaster(document, 90);
    boxes = await detectText(document, TEXT_DETECTION_SIDE);
    rotation = 90;
  }
  if ((await upsideDownProbability(document, boxes)) > UPSIDE_DOWN) {
    const { width, height } = document;
    document = rotateRaster(document, 180);
    boxes = boxes.map((box) => ({ x: width - box.x - box.width, y: height - box.y - box.height, width: box.width, height: box.height }));
    rotation = rotation === 90 ? 270 : 180;
  }
  return { document, boxes, rotation };
}

/** Reads a document front. Throws ImageError for an unusable image. */
export async function readDocumentFront(input: Buffer | Uint8Array | ArrayBuffer): Promise<{ result: DocumentFrontResult; portrait: Buffer | null }> {
  const started = performance.now();
  const photo = await decodeImage(input, { channels: 3, maxPixels: DEFAULT_MAX_PIXELS, maxSide: READ_SIDE });
  const decoded = performance.now();
  const straightened = await straightenDocument(photo);
  const straightenedAt = performance.now();
  const { document, boxes, rotation } = await uprightText(straightened.image);
  const detectedAt = performance.now();
  const isMrz = (box: Box) => box.width >= MRZ_ASPECT * box.height && box.y > document.height / 2;
  const lines: TextLine[] = (await recognizeText(document, boxes.filter((box) => !isMrz(box)))).filter((line) => line.text);
  const recognizedAt = performance.now();
  const fields = extractFields(lines);
  const fieldsAt = performance.now();
  // The portrait is the largest face; a passport's small "ghost" copy of it is not a second person.
  const face = (await detectFaces(document))[0] ?? null;
  const portrait = face ? await encodeJpeg(portraitCrop(document, face)) : null;
  const faceAt = performance.now();
  return {
    result: {
      text_read: Object.keys(fields).length >= MIN_FIELDS,
      fields,
      lines: lines.map((line) => ({ text: line.text, confidence: Math.round(line.confidence * 1000) / 1000, box: boxTuple(line.box) })),
      document: {
        method: straightened.method,
        corners: straightened.corners?.map((p) => ({ x: Math.round(p.x), y: Math.round(p.y) })) ?? null,
        angle: Math.round(straightened.angle * 10) / 10,
        rotation,
        width: document.width,
        height: document.height,
      },
      face_found: face !== null,
      face: face ? { box: boxTuple(face.box), score: Math.round(face.score * 1000) / 1000 } : null,
      timings: {
        decode_ms: tenths(decoded - started),
        straighten_ms: tenths(straightenedAt - decoded),
        text_detection_ms: tenths(detectedAt - straightenedAt),
        text_recognition_ms: tenths(recognizedAt - detectedAt),
        fields_ms: tenths(fieldsAt - recognizedAt),
        face_ms: tenths(faceAt - fieldsAt),
        total_ms: tenths(faceAt - started),
      },
    },
    portrait,
  };
}
