import type { AppContext } from '../../../context.ts';
import { runVision } from '../../../pools.ts';
import { livenessVerdict, type LivenessReadResult } from '../../../vision/liveness.ts';
import { sampleFrames, VideoError } from '../../../vision/video.ts';
import type { Outcome, VerifyInput } from './common.ts';

/**
 * liveness_video. Off (the default, WARDEN_LIVENESS): the content is not analysed and the result is
 * success, as the spec says "at present". On: frames sampled by ffmpeg are checked for a face and
 * for signs of a presentation attack (src/vision/liveness.ts, models/liveness/CARD.md); the result
 * keeps the same format, with code fail and a reason when the check fails.
 */
export async function verifyLiveness(app: AppContext, { artifact }: VerifyInput): Promise<Outcome> {
  const { enabled, ffmpeg } = app.config.liveness;
  if (!enabled || !ffmpeg) return { code: 'success', message: 'Liveness video received.', data: null, details: { content_type: artifact.content_type } };
  let mosaic: Buffer;
  try {
    mosaic = await sampleFrames(ffmpeg, await app.files.read(artifact.path));
  } catch (error) {
    if (!(error instanceof VideoError)) throw error;
    return { code: 'fail', message: error.message, data: null, details: { reason: 'video_unreadable', content_type: artifact.content_type } };
  }
  const read = await runVision<LivenessReadResult>(app.pools.vision, 'liveness', mosaic);
  if (!read.ok) return { code: 'fail', message: read.message, data: null, details: { reason: 'video_unreadable', content_type: artifact.content_type } };
  const result = read.result;
  const details = { content_type: artifact.content_type, ...result };
  const verdict = livenessVerdict(result.frames, result.frame_scores, result.threshold);
  if (verdict === 'no_face') {
    return { code: 'fail', message: `No face was seen in most of the video (${result.frames_with_face} of ${result.frames} frames sampled): film the face, in front of the camera.`, data: null, details: { reason: 'no_face', ...details } };
  }
  if (result.frames_with_several_faces * 2 > result.frames) {
    return { code: 'fail', message: 'Several faces were seen in most of the video; exactly one person must be in it.', data: null, details: { reason: 'several_faces', ...details } };
  }
  if (verdict === 'attack') {
    return {
      code: 'fail',
      message: `The face looks like a photograph or a screen held up to the camera (attack score ${result.attack_score}, threshold ${result.threshold}).`,
      data: null,
      details: { reason: 'presentation_attack', ...details },
    };
  }
  return { code: 'success', message: `A live face was seen (attack score ${result.attack_score}, threshold ${result.threshold}).`, data: null, details };
}
