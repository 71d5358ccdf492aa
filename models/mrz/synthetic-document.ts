/**
 * Synthetic identity documents for the MRZ reader's tests and fixtures: a page with a guilloche
 * background, a noisy "photo", printed labels and values, and an ICAO 9303 MRZ in OCR-B with correct
 * check digits; then "photographed": placed on a table, rotated, put in perspective, unevenly lit,
 * blurred and JPEG-compressed; and the seeded sets of such photographs that `npm run eval` reads
 * (bench/eval-mrz.ts). Uses the OCR-B fonts shipped in models/mrz/fonts.
 */
import { createCanvas } from '@napi-rs/canvas';
import sharp from 'sharp';
import { checkDigit, type MrzFormat } from '../../src/vision/mrz/decode.ts';
import { sample, type GrayImage } from '../../src/vision/mrz/image.ts';
import { capHeightRatio, gaussianBlur, registerOcrbFonts, seededRandom, type Random } from './render-training-data.ts';

export interface SyntheticDocument {
  format: MrzFormat;
  lines: string[];
  fields: {
    document_type: string;
    issuing_country: string;
    last_name: string;
    first_name: string;
    document_number: string;
    nationality: string;
    birth_date: string;
    sex: 'M' | 'F';
    expiry_date: string;
  };
}

const SURNAMES = ['ERIKSSON', 'MUSTERMANN', 'DUPONT', 'SMITH', 'OKONKWO', 'NAKAMURA', 'GARCIA<LOPEZ', 'VAN<DER<BERG', 'KOWALSKI', 'OBRIEN'];
const GIVEN = ['ANNA<MARIA', 'ERIKA', 'JEAN<PIERRE', 'JOHN', 'CHIDI', 'YUKI', 'LUCIA', 'PIETER<JAN', 'MAREK', 'SIOBHAN'];
const STATES = ['UTO', 'D<<', 'FRA', 'GBR', 'NGA', 'JPN', 'ESP', 'NLD', 'POL', 'IRL', 'CAN', 'USA'];

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const digits = (random: Random, count: number) => Array.from({ length: count }, () => Math.floor(random() * 10)).join('');
const alphanumeric = (random: Random, count: number) =>
  Array.from({ length: count }, () => '0123456789ABCDEFGHJKLMNPRSTUVWXYZ'[Math.floor(random() * 33)]).join('');
const pad = (text: string, length: number) => (text + '<'.repeat(length)).slice(0, length);
const yymmdd = (year: number, month: number, day: number) =>
  `${String(year % 100).padStart(2, '0')}${String(month).padStart(2, '0')}${String(day).padStart(2, '0')}`;

/** A random holder and document with every check digit right. */
export function randomDocument(random: Random, format: MrzFormat): SyntheticDocument {
  const surname = pick(random, SURNAMES);
  const given = pick(random, GIVEN);
  const state = pick(random, STATES);
  const nationality = pick(random, STATES);
  const birthYear = 1950 + Math.floor(random() * 55);
  const birth = yymmdd(birthYear, 1 + Math.floor(random() * 12), 1 + Math.floor(random() * 28));
  const expiryYear = 2026 + Math.floor(random() * 10);
  const expiry = yymmdd(expiryYear, 1 + Math.floor(random() * 12), 1 + Math.floor(random() * 28));
  const sex = random() < 0.5 ? 'M' : 'F';
  const number = alphanumeric(random, 1) + digits(random, 7) + alphanumeric(random, 1);
  const name = (length: number) => pad(`${surname}<<${given}`, length);
  const withCheck = (text: string) => text + checkDigit(text);
  const drawn = format === 'TD3' ? 'P<' : format === 'MRVA' || format === 'MRVB' ? 'V<' : pick(random, ['I<', 'ID', 'AC']);
  // A 36-character MRZ starting IDFRA is France's older national ID card, a layout of its own.
  const code = format === 'TD2' && drawn === 'ID' && state === 'FRA' ? 'I<' : drawn;
  let lines: string[];
  switch (format) {
    case 'TD3':
    case 'MRVA': {
      const personal = format === 'TD3' ? pad(random() < 0.5 ? alphanumeric(random, 9) : '', 14) : '';
      const start = withCheck(number) + nationality + withCheck(birth) + sex + withCheck(expiry);
      const line2 =
        format === 'TD3'
          ? (() => {
              const body = start + personal + (personal.startsWith('<') ? '<' : String(checkDigit(personal)));
              return body + checkDigit(body.slice(0, 10) + body.slice(13, 20) + body.slice(21, 43));
            })()
          : start + pad(alphanumeric(random, 6), 16);
      lines = [code + state + name(39), line2];
      break;
    }
    case 'TD2':
    case 'MRVB': {
      const start = withCheck(number) + nationality + withCheck(birth) + sex + withCheck(expiry);
      const line2 =
        format === 'TD2'
          ? (() => {
              const body = start + '<'.repeat(7);
              return body + checkDigit(body.slice(0, 10) + body.slice(13, 20) + body.slice(21, 35));
            })()
          : start + pad(alphanumeric(random, 4), 8);
      lines = [code + state + name(31), line2];
      break;
    }
    case 'TD1': {
      const line1 = code + state + withCheck(number) + pad('', 15);
      const body2 = withCheck(birth) + sex + withCheck(expiry) + nationality + pad('', 11);
      const composite = checkDigit(line1.slice(5, 30) + body2.slice(0, 7) + body2.slice(8, 15) + body2.slice(18, 29));
      lines = [line1, body2 + composite, name(30)];
      break;
    }
  }
  return {
    format,
    lines,
    fields: {
      document_type: code.replace(/<$/, ''),
      issuing_country: state.replace(/<+$/, ''),
      last_name: surname.replace(/</g, ' '),
      first_name: given.replace(/</g, ' '),
      document_number: number,
      nationality: nationality.replace(/<+$/, ''),
      birth_date: `${birthYear}-${birth.slice(2, 4)}-${birth.slice(4, 6)}`,
      sex,
      expiry_date: `${expiryYear}-${expiry.slice(2, 4)}-${expiry.slice(4, 6)}`,
    },
  };
}

/** Page size in millimetres and the MRZ's characters per line (ICAO 9303 parts 4 to 7). */
const PAGES: Record<MrzFormat, { width: number; height: number }> = {
  TD3: { width: 125, height: 88 },
  MRVA: { width: 120, height: 80 },
  TD2: { width: 105, height: 74 },
  MRVB: { width: 105, height: 74 },
  TD1: { width: 85.6, height: 54 },
};

/** The flat page, `pixelsPerMm` resolution, as grey levels; `withMrz` false leaves the MRZ out. */
export function renderPage(document: SyntheticDocument, random: Random, pixelsPerMm: number, withMrz = true): GrayImage {
  const families = registerOcrbFonts();
  const page = PAGES[document.format];
  const width = Math.round(page.width * pixelsPerMm);
  const height = Math.round(page.height * pixelsPerMm);
  const canvas = createCanvas(width, height);
  const context = canvas.getContext('2d');
  const paper = 225 + Math.floor(random() * 30);
  context.fillStyle = `rgb(${paper},${paper - 4},${paper - 12})`;
  context.fillRect(0, 0, width, height);
  for (let curve = 0; curve < 14; curve++) {
    context.strokeStyle = `rgba(${120 + Math.floor(random() * 80)},${140 + Math.floor(random() * 80)},200,0.35)`;
    context.lineWidth = 0.15 * pixelsPerMm;
    context.beginPath();
    const period = (8 + random() * 30) * pixelsPerMm;
    const amplitude = (2 + random() * 10) * pixelsPerMm;
    const offset = random() * height;
    for (let x = 0; x <= width; x += 2) {
      const y = offset + amplitude * Math.sin(x / period + curve);
      if (x === 0) context.moveTo(x, y);
      else context.lineTo(x, y);
    }
    context.stroke();
  }
  const mm = (value: number) => value * pixelsPerMm;
  const photo = { x: mm(5), y: mm(page.height * 0.18), w: mm(page.width * 0.26), h: mm(page.height * 0.45) };
  context.fillStyle = 'rgb(170,160,150)';
  context.fillRect(photo.x, photo.y, photo.w, photo.h);
  for (let blob = 0; blob < 300; blob++) {
    const tone = Math.floor(random() * 200);
    context.fillStyle = `rgba(${tone},${Math.floor(tone * 0.9)},${Math.floor(tone * 0.8)},0.5)`;
    context.beginPath();
    context.arc(photo.x + random() * photo.w, photo.y + random() * photo.h, mm(0.5 + random() * 3), 0, Math.PI * 2);
    context.fill();
  }
  const { fields } = document;
  const labels: Array<[string, string]> = [
    ['Type / Type', fields.document_type],
    ['Surname / Nom', fields.last_name],
    ['Given names / Prénoms', fields.first_name],
    ['Nationality / Nationalité', fields.nationality],
    ['Date of birth / Date de naissance', fields.birth_date],
    ['Document No. / No du document', fields.document_number],
  ];
  context.fillStyle = 'rgb(40,40,60)';
  context.font = `bold ${mm(4)}px sans-serif`;
  context.fillText(document.format === 'TD3' ? 'PASSPORT' : 'IDENTITY DOCUMENT', mm(page.width * 0.33), mm(7));
  let y = mm(page.height * 0.2);
  const step = mm(page.height * 0.075);
  for (const [label, value] of labels) {
    context.font = `${mm(1.6)}px sans-serif`;
    context.fillText(label, mm(page.width * 0.33), y);
    context.font = `${mm(2.6)}px sans-serif`;
    context.fillText(value, mm(page.width * 0.35), y + mm(3));
    y += step;
    if (y > mm(page.height * 0.68)) break;
  }
  // ICAO: 2.54 mm pitch, capitals about 2.4 mm, lines 4 mm apart, first character 5 to 6 mm from the left edge.
  const family = families[0]!;
  const capHeight = mm(2.4);
  context.font = `${capHeight / capHeightRatio(family)}px ${family}`;
  context.fillStyle = 'rgb(20,20,25)';
  context.textAlign = 'center';
  const pitch = mm(2.54);
  const lineSpacing = mm(4.2);
  const left = (width - document.lines[0]!.length * pitch) / 2 + pitch / 2;
  const bottom = height - mm(3.5);
  const mrz = withMrz ? document.lines : [];
  mrz.forEach((line, index) => {
    const baseline = bottom - (document.lines.length - 1 - index) * lineSpacing;
    for (let column = 0; column < line.length; column++) context.fillText(line[column]!, left + column * pitch, baseline);
  });
  const rgba = context.getImageData(0, 0, width, height).data;
  const data = new Uint8Array(width * height);
  for (let i = 0; i < data.length; i++) data[i] = Math.round(0.299 * rgba[i * 4]! + 0.587 * rgba[i * 4 + 1]! + 0.114 * rgba[i * 4 + 2]!);
  return { width, height, data };
}

export interface PhotoOptions {
  /** Output size in pixels. */
  width: number;
  height: number;
  /** Share of the output's width the page spans. */
  coverage: number;
  /** Degrees; 180 for an upside-down document. */
  angle: number;
  /** Keystone: how much narrower the far edge is, 0 for none. */
  perspective: number;
  /** Darkening towards one side, 0 to 1. */
  shadow: number;
  /** Gaussian blur sigma in output pixels. */
  blur: number;
  noise: number;
  quality: number;
}

/** Places the page on a darker table as a camera would see it, and encodes it as JPEG. */
export async function photograph(page: GrayImage, random: Random, options: PhotoOptions): Promise<Buffer> {
  const { width, height } = options;
  const scale = (options.coverage * width) / page.width;
  const angle = (options.angle * Math.PI) / 180;
  const cos = Math.cos(angle);
  const sin = Math.sin(angle);
  const centerX = width / 2;
  const centerY = height / 2;
  const table = 70 + Math.floor(random() * 50);
  let pixels: Float32Array = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      // Inverse mapping: output pixel -> page pixel, with the keystone applied along the page's vertical axis.
      const dx = x - centerX;
      const dy = y - centerY;
      let u = (dx * cos + dy * sin) / scale;
      const v = (-dx * sin + dy * cos) / scale;
      const keystone = 1 + options.perspective * (v / page.height);
      u /= keystone;
      const pageX = u + page.width / 2;
      const pageY = v + page.height / 2;
      const inside = pageX >= 0 && pageY >= 0 && pageX <= page.width - 1 && pageY <= page.height - 1;
      const texture = table + 12 * Math.sin(x * 0.05) * Math.cos(y * 0.03);
      const light = 1 - options.shadow * (x / width);
      pixels[y * width + x] = (inside ? sample(page, pageX, pageY) : texture) * light;
    }
  }
  pixels = gaussianBlur(pixels, width, height, options.blur);
  const bytes = new Uint8Array(width * height);
  for (let i = 0; i < bytes.length; i++) {
    const noisy = pixels[i]! + options.noise * (random() + random() + random() - 1.5);
    bytes[i] = noisy < 0 ? 0 : noisy > 255 ? 255 : Math.round(noisy);
  }
  return sharp(bytes, { raw: { width, height, channels: 1 } }).jpeg({ quality: options.quality }).toBuffer();
}

/**
 * Conditions of an evaluation set. Per document: tilt up to 15 degrees (a fifth upside down),
 * keystone up to 0.1, shade up to 0.5, the page wholly inside a 1000 x 750 frame. "typical": the page
 * spans 55 to 95 % of the frame's width (MRZ capitals about 9 to 18 px tall), blur sigma 0.3 to 1.5
 * px, noise up to 12 grey levels, JPEG quality 45 to 90. "hard": 35 to 60 % (capitals 6 to 11 px),
 * blur 0.8 to 2.2 px, noise up to 20, quality 25 to 70.
 */
export const PROFILES = {
  typical: { coverage: [0.55, 0.95], blur: [0.3, 1.5], noise: 12, quality: [45, 90] },
  hard: { coverage: [0.35, 0.6], blur: [0.8, 2.2], noise: 20, quality: [25, 70] },
} as const;
export type Profile = keyof typeof PROFILES;

export const FORMATS: readonly MrzFormat[] = ['TD3', 'TD2', 'TD1', 'MRVA', 'MRVB'];

/** Seeds of evaluation sets start here: disjoint from the training renderer's (1, 2) and the fixtures' (1000+, 77+). */
const EVALUATION_SEED = 900_000;

/** The largest coverage that keeps the whole tilted page (keystone included) inside the frame. */
function fullyInFrame(aspect: number, angle: number, width: number, height: number): number {
  const cos = Math.abs(Math.cos((angle * Math.PI) / 180));
  const sin = Math.abs(Math.sin((angle * Math.PI) / 180));
  return 0.92 * Math.min(1 / (cos + aspect * sin), height / (width * (sin + aspect * cos)));
}

export interface EvaluationPhotograph {
  document: SyntheticDocument;
  image: Buffer;
  options: PhotoOptions;
}

/** Photograph `index` of `format` in a profile's evaluation set: the same seed always gives the same bytes. */
export async function evaluationPhotograph(profile: Profile, format: MrzFormat, index: number): Promise<EvaluationPhotograph> {
  const conditions = PROFILES[profile];
  const random = seededRandom(EVALUATION_SEED + FORMATS.indexOf(format) * 10_000 + index);
  const between = ([low, high]: readonly number[]) => low! + (high! - low!) * random();
  const document = randomDocument(random, format);
  const page = renderPage(document, random, 8);
  const upsideDown = random() < 0.2;
  const angle = (random() * 2 - 1) * 15 + (upsideDown ? 180 : 0);
  const options: PhotoOptions = {
    width: 1000,
    height: 750,
    coverage: Math.min(between(conditions.coverage), fullyInFrame(page.height / page.width, angle, 1000, 750)),
    angle,
    perspective: 0.1 * random(),
    shadow: 0.5 * random(),
    blur: between(conditions.blur),
    noise: conditions.noise * random(),
    quality: Math.round(between(conditions.quality)),
  };
  return { document, image: await photograph(page, random, options), options };
}
