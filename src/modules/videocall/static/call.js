/*
 * Warden video identification: the end user's side of the call, as a plain ES module.
 *
 *   import { startCall } from 'https://warden.example/kyc/call/call.js';
 *   const call = startCall({ token: endpointToken, container: document.getElementById('kyc'), baseUrl: 'https://warden.example' });
 *   call.onchange = (state, detail) => { ... };   // consent, connecting, queued, in_call, ended, error
 *
 * It asks for consent to the call and (separately) to its recording, registers the session's
 * endpoint_token on the documents socket (/ws/documents/), joins the call and shows the queue
 * position; when an agent joins it answers the agent's offer (RTCPeerConnection with the ICE
 * servers the server sends), shows both videos, answers snapshot requests with a full-resolution
 * frame of its own camera (take_snapshot) and shows how the call ended. `relay: true` sends
 * media through TURN only (iceTransportPolicy "relay"). Embedded elsewhere, the merchant's page
 * links call.css itself (or passes stylesheet: true) and must allow this site in connect-src.
 */

const CONSENT_INTRO = 'To verify your identity, an agent will see and hear you in a live video call and may take still pictures of your face and your identity document.';
const CONSENT_CALL = 'I agree to the video call and to pictures being taken during it.';
const CONSENT_RECORDING = 'I agree to the call being recorded and kept as evidence of the verification.';

const ENDINGS = {
  agent_ended: 'The agent ended the call.',
  agent_disconnected: 'The agent was disconnected.',
  end_user_left: 'You left the call.',
  session_closed: 'The verification is closed.',
};

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
  node.append(...children);
  return node;
}

export function startCall({ token, container, baseUrl = '', relay = false, stylesheet = false }) {
  if (!token) throw new Error('startCall needs the session endpoint_token');
  const base = new URL(baseUrl || '/', location.href);
  if (stylesheet) document.head.append(element('link', { rel: 'stylesheet', href: new URL('/kyc/call/call.css', base).href }));

  const call = { state: 'consent', onchange: null, peer: null, leave };
  let socket = null;
  let camera = null;
  let pending = [];
  let iceServers = [];

  const status = element('p', { class: 'wc-status', role: 'status', 'aria-live': 'polite' });
  const root = element('section', { class: 'warden-call', 'aria-label': 'Video identification call' });
  container.append(root);

  const setState = (state, text, detail) => {
    call.state = state;
    root.dataset.state = state;
    if (text !== undefined) status.textContent = text;
    if (typeof call.onchange === 'function') call.onchange(state, detail);
  };

  // Consent: the exact words shown are what the server keeps (consent.text).
  const callBox = element('input', { type: 'checkbox', id: 'wc-consent-call', required: true });
  const recordingBox = element('input', { type: 'checkbox', id: 'wc-consent-recording' });
  const joinButton = element('button', { type: 'submit', class: 'wc-primary' }, 'Join the video call');
  const form = element(
    'form',
    { class: 'wc-consent' },
    element('p', { id: 'wc-consent-intro' }, CONSENT_INTRO),
    element('div', { class: 'wc-check' }, callBox, element('label', { for: 'wc-consent-call' }, CONSENT_CALL)),
    element('div', { class: 'wc-check' }, recordingBox, element('label', { for: 'wc-consent-recording' }, CONSENT_RECORDING)),
    joinButton,
  );
  const localVideo = element('video', { autoplay: true, playsinline: true, muted: true, 'aria-label': 'Your camera' });
  localVideo.muted = true;
  const remoteVideo = element('video', { autoplay: true, playsinline: true, 'aria-label': 'The agent' });
  const videos = element(
    'div',
    { class: 'wc-videos', hidden: true },
    element('figure', { class: 'wc-remote' }, remoteVideo, element('figcaption', {}, 'Agent')),
    element('figure', { class: 'wc-local' }, localVideo, element('figcaption', {}, 'You')),
  );
  const leaveButton = element('button', { type: 'button', class: 'wc-secondary', hidden: true }, 'Leave the call');
  root.append(status, form, videos, leaveButton);
  setState('consent', 'Please read and agree to start the call.');

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!callBox.checked) {
      setState('consent', 'You need to agree to the video call to continue.');
      callBox.focus();
      return;
    }
    joinButton.disabled = true;
    const consent = { call: true, recording: recordingBox.checked, text: [CONSENT_INTRO, CONSENT_CALL, CONSENT_RECORDING].join('\n'), at: new Date().toISOString() };
    void join(consent).catch((error) => fail('camera', error instanceof Error ? error.message : String(error)));
  });
  leaveButton.addEventListener('click', () => leave());

  async function join(consent) {
    setState('connecting', 'Starting your camera…');
    camera = await navigator.mediaDevices.getUserMedia({ audio: true, video: { width: { ideal: 1920 }, height: { ideal: 1080 } } });
    localVideo.srcObject = camera;
    form.hidden = true;
    videos.hidden = false;
    leaveButton.hidden = false;
    setState('connecting', 'Connecting…');
    const url = new URL('/ws/documents/', base);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    socket = new WebSocket(url);
    socket.addEventListener('open', () => send({ event: 'register', token }));
    socket.addEventListener('message', (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      void receive(frame, consent).catch((error) => fail('call_failed', error instanceof Error ? error.message : String(error)));
    });
    socket.addEventListener('close', () => {
      if (call.state !== 'ended' && call.state !== 'error') finish('connection_lost', 'The connection was lost. Reload the page to try again.');
    });
  }

  function send(frame) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
  }

  async function receive(frame, consent) {
    if (frame.event === 'registered') return send({ event: 'call', type: 'join', data: { consent } });
    if (frame.event === 'error') return fail(frame.data.reason, frame.data.message);
    if (frame.event === 'signal') return signal(frame.data);
    if (frame.event !== 'call') return;
    if (frame.type === 'queued') setState('queued', `Waiting for an agent. You are number ${frame.data.position} in the queue.`, frame.data);
    else if (frame.type === 'agent_joined') connect(frame.data.ice_servers || []);
    else if (frame.type === 'snapshot_request') await snapshot(frame.data.request_id);
    else if (frame.type === 'ended') finish(frame.data.reason, ENDINGS[frame.data.reason] || `The call has ended (${frame.data.reason}).`);
  }

  function connect(servers) {
    iceServers = servers;
    // The agent may join again (a reloaded console resumes the call): a fresh connection each time.
    if (call.peer) call.peer.close();
    setState('connecting', 'An agent has joined. Connecting the video…');
    const peer = new RTCPeerConnection({ iceServers, iceTransportPolicy: relay ? 'relay' : 'all' });
    call.peer = peer;
    for (const track of camera.getTracks()) peer.addTrack(track, camera);
    peer.addEventListener('track', (event) => {
      if (remoteVideo.srcObject !== event.streams[0]) remoteVideo.srcObject = event.streams[0];
    });
    peer.addEventListener('icecandidate', (event) => {
      if (event.candidate) send({ event: 'signal', data: { kind: 'ice', candidate: event.candidate.toJSON() } });
    });
    peer.addEventListener('connectionstatechange', () => {
      if (peer.connectionState === 'connected') setState('in_call', 'You are in the call with the agent.');
      else if (peer.connectionState === 'failed') setState('connecting', 'The video connection failed; the agent may call again.');
    });
  }

  async function signal(data) {
    const peer = call.peer;
    if (!peer) return;
    if (data.kind === 'offer') {
      await peer.setRemoteDescription({ type: 'offer', sdp: data.sdp });
      await peer.setLocalDescription(await peer.createAnswer());
      send({ event: 'signal', data: { kind: 'answer', sdp: peer.localDescription.sdp } });
      // Candidates that came before the offer could not be added until now.
      for (const candidate of pending.splice(0)) await peer.addIceCandidate(candidate);
    } else if (data.kind === 'ice') {
      if (peer.remoteDescription) await peer.addIceCandidate(data.candidate);
      else pending.push(data.candidate);
    } else if (data.kind === 'hangup') {
      finish('agent_ended', ENDINGS.agent_ended);
    }
  }

  /** A full-resolution frame of the camera itself (not of the shown, possibly scaled, video), as JPEG. */
  async function snapshot(requestId) {
    const settings = camera.getVideoTracks()[0].getSettings();
    const canvas = element('canvas');
    canvas.width = settings.width || localVideo.videoWidth;
    canvas.height = settings.height || localVideo.videoHeight;
    canvas.getContext('2d').drawImage(localVideo, 0, 0, canvas.width, canvas.height);
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, 'image/jpeg', 0.92));
    const body = new FormData();
    body.set('token', token);
    body.set('snapshot', blob, `snapshot-${requestId}.jpg`);
    const response = await fetch(new URL('/api/document/take_snapshot/', base), { method: 'POST', body });
    status.textContent = response.ok ? 'The agent took a picture.' : 'A picture could not be sent to the agent.';
  }

  /** The call is over (`ended`), or could not go on (`error`: a refusal, no camera): media and socket closed. */
  function finish(reason, text, state = 'ended') {
    if (call.peer) call.peer.close();
    if (camera) for (const track of camera.getTracks()) track.stop();
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close();
    videos.hidden = true;
    leaveButton.hidden = true;
    setState(state, text, { reason });
  }

  function fail(reason, message) {
    finish(reason, message, 'error');
  }

  function leave() {
    send({ event: 'call', type: 'leave' });
    finish('end_user_left', ENDINGS.end_user_left);
  }

  return call;
}
