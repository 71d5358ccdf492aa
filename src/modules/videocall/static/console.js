/*
 * The agent console (/admin/videocall/): the lobby, the availability switch and the call. Posts
 * are urlencoded with the session's csrfmiddlewaretoken (the admin shell checks it); signals go
 * over the page's staff live socket (admin.js's window.wardenLive: /admin/live/). The
 * agent makes the offer; the end user's answer and ICE candidates come back as videoCallSignal
 * broadcasts. ?relay=1 sends media through TURN only (iceTransportPolicy "relay").
 */
const root = document.getElementById('videocall');
const base = '/admin/videocall/';
const csrf = root.dataset.csrfToken;
const relay = new URLSearchParams(location.search).get('relay') === '1';
const $ = (id) => document.getElementById(id);
const status = $('vc-status');

/** The call in progress, or null. Kept in memory only: the agent token never leaves the page. */
let call = null;
// Exposed for diagnostics (the browser test reads the connection's statistics).
window.wardenConsole = { get call() { return call; } };

const say = (text) => (status.textContent = text);

async function post(path, fields = {}) {
  const body = new URLSearchParams({ ...fields, csrfmiddlewaretoken: csrf });
  const response = await fetch(base + path, { method: 'POST', body, credentials: 'same-origin', headers: { accept: 'application/json' } });
  return answer(response);
}

async function answer(response) {
  const json = (response.headers.get('content-type') || '').includes('json') ? await response.json() : null;
  if (!response.ok) throw new Error((json && json.message) || `The server refused (${response.status}).`);
  return json;
}

// The lobby: read again whenever the queue changes.
async function refreshLobby() {
  const lobby = await answer(await fetch(`${base}lobby.json`, { credentials: 'same-origin' }));
  const rows = lobby.queue.map((entry) => {
    const row = document.createElement('tr');
    const cells = [entry.customer_ref, `${Math.round(entry.waited_seconds / 60)} min`, entry.offered_to_you ? 'Offered to you' : entry.status];
    for (const text of cells) {
      const cell = document.createElement('td');
      cell.textContent = text;
      row.append(cell);
    }
    const action = document.createElement('td');
    const take = document.createElement('button');
    take.type = 'button';
    take.textContent = 'Take';
    take.setAttribute('aria-label', `Take the call of ${entry.customer_ref}`);
    take.dataset.session = entry.session_id;
    take.disabled = Boolean(call);
    take.addEventListener('click', () => void takeCall(entry.session_id).catch((error) => say(error.message)));
    action.append(take);
    row.append(action);
    return row;
  });
  $('vc-lobby').tBodies[0].replaceChildren(...rows);
  $('vc-lobby-empty').hidden = rows.length > 0;
  // A lobby read while the switch's own change is on its way would show the state before it.
  if (lobby.you && !switching) $('vc-available').checked = lobby.you.status === 'AVAILABLE';
  // A call of ours this page does not hold (the console was reloaded): taking it again resumes it.
  const ours = lobby.you && lobby.you.call;
  $('vc-resume-line').hidden = !ours || Boolean(call);
  if (ours) {
    $('vc-resume-customer').textContent = ours.customer_ref;
    $('vc-resume').dataset.session = ours.session_id;
  }
}

$('vc-resume').addEventListener('click', (event) => {
  const session = event.currentTarget.dataset.session;
  if (session) void takeCall(session).catch((error) => say(error.message));
});

let switching = false;
$('vc-available').addEventListener('change', (event) => {
  const wanted = event.target.checked;
  switching = true;
  post('availability/', { available: String(wanted) })
    .then(() => say(wanted ? 'You are available for calls.' : 'You are away.'))
    .catch((error) => {
      event.target.checked = !wanted;
      say(error.message);
    })
    .finally(() => (switching = false));
});

// The page's live socket (admin.js's, shared with the notifications): lobby changes, the end
// user's signals, the end of the call.
const live = window.wardenLive;
let loggedIn = null;
const socketReady = new Promise((resolve) => (loggedIn = resolve));
live.on((frame) => {
  if (frame.type === 'login') {
    root.dataset.live = 'open';
    loggedIn();
    void refreshLobby().catch(() => {});
  } else if (frame.type === 'signal_refused') {
    say(`Signal refused: ${frame.payload.message}`);
  } else if (frame.event === 'broadcast') {
    void onBroadcast(frame.data).catch((error) => say(error.message));
  }
});

async function onBroadcast(data) {
  if (data.type === 'videoCallQueue' || (data.type === 'notification' && data.data && data.data.kind === 'incoming_call')) {
    await refreshLobby();
  } else if (data.type === 'videoCallSignal' && call && data.data.session === call.session) {
    await onSignal(data.data);
  } else if (data.type === 'videoCallEnded' && call && data.data.session === call.session) {
    await hangUp(data.data.reason === 'end_user_left' ? 'The customer left the call.' : `The call ended (${data.data.reason}).`, false);
  }
}

function sendSignal(signal) {
  if (!live.send({ type: 'signal', payload: { session: call.session, ...signal } })) say('The live connection is down: reconnecting…');
}

async function takeCall(sessionId) {
  const taken = await post(`${encodeURIComponent(sessionId)}/take/`);
  const camera = await navigator.mediaDevices.getUserMedia({ audio: true, video: true });
  const peer = new RTCPeerConnection({ iceServers: taken.ice_servers, iceTransportPolicy: relay ? 'relay' : 'all' });
  const remote = new MediaStream();
  call = { session: sessionId, token: taken.agent_token, consent: taken.consent, peer, camera, remote, pending: [], recorder: null, chunks: [], poll: 0, live: true };
  $('vc-resume-line').hidden = true;
  $('vc-customer').textContent = taken.customer_ref;
  $('vc-call').hidden = false;
  $('vc-local').srcObject = camera;
  $('vc-remote').srcObject = remote;
  $('vc-hangup').disabled = false;
  $('vc-snapshot').disabled = false;
  $('vc-available').disabled = true;
  for (const button of document.querySelectorAll('#vc-lobby button')) button.disabled = true;
  for (const track of camera.getTracks()) peer.addTrack(track, camera);
  peer.addEventListener('track', (event) => {
    remote.addTrack(event.track);
    // Recording starts with the customer's media, only when they consented to it.
    if (call.consent && call.consent.recording && !call.recorder && remote.getTracks().length >= 2) startRecording();
  });
  peer.addEventListener('icecandidate', (event) => {
    if (event.candidate) sendSignal({ kind: 'ice', candidate: event.candidate.toJSON() });
  });
  peer.addEventListener('connectionstatechange', () => {
    root.dataset.connection = peer.connectionState;
    if (peer.connectionState === 'connected') say(`In call with ${taken.customer_ref}.`);
  });
  $('vc-recording').textContent = call.consent && call.consent.recording ? 'The customer consented to recording: the call will be recorded.' : 'The customer did not consent to recording: the call is not recorded.';
  say(`Calling ${taken.customer_ref}…`);
  await socketReady;
  await peer.setLocalDescription(await peer.createOffer());
  sendSignal({ kind: 'offer', sdp: peer.localDescription.sdp });
  void refreshArtifacts();
  call.poll = setInterval(() => void refreshArtifacts().catch(() => {}), 3000);
}

async function onSignal(signal) {
  const peer = call.peer;
  if (signal.kind === 'answer') {
    await peer.setRemoteDescription({ type: 'answer', sdp: signal.sdp });
    for (const candidate of call.pending.splice(0)) await peer.addIceCandidate(candidate);
  } else if (signal.kind === 'ice') {
    if (peer.remoteDescription) await peer.addIceCandidate(signal.candidate);
    else call.pending.push(signal.candidate);
  } else if (signal.kind === 'hangup') {
    await hangUp('The customer hung up.', false);
  }
}

function startRecording() {
  const type = ['video/webm;codecs=vp8,opus', 'video/webm', 'video/mp4'].find((candidate) => MediaRecorder.isTypeSupported(candidate));
  if (!type) return void ($('vc-recording').textContent = 'This browser cannot record the call.');
  // A modest bit rate keeps a long call's file within the upload limit.
  call.recorder = new MediaRecorder(call.remote, { mimeType: type, videoBitsPerSecond: 250_000, audioBitsPerSecond: 32_000 });
  call.recorder.addEventListener('dataavailable', (event) => {
    if (event.data.size) call.chunks.push(event.data);
  });
  call.recorder.start(1000);
  root.dataset.recording = 'on';
  $('vc-recording').textContent = 'Recording (the customer consented).';
}

/** The recording's last chunk arrives after stop(): resolves with the whole file, or null when nothing was recorded. */
function stopRecording() {
  const recorder = call.recorder;
  if (!recorder || recorder.state === 'inactive') return Promise.resolve(call.chunks.length ? new Blob(call.chunks, { type: recorder ? recorder.mimeType : 'video/webm' }) : null);
  return new Promise((resolve) => {
    recorder.addEventListener('stop', () => resolve(new Blob(call.chunks, { type: recorder.mimeType })), { once: true });
    recorder.stop();
  });
}

/**
 * Ends the media, uploads the recording and, when `tell`, ends the call on the server (which tells
 * the end user's page). Called once per call; the close form stays usable afterwards.
 */
async function hangUp(text, tell) {
  if (!call || !call.live) return;
  call.live = false;
  $('vc-hangup').disabled = true;
  $('vc-snapshot').disabled = true;
  if (tell) await post(`${encodeURIComponent(call.session)}/end/`).catch((error) => say(error.message));
  const recording = await stopRecording();
  call.peer.close();
  for (const track of call.camera.getTracks()) track.stop();
  clearInterval(call.poll);
  say(text);
  if (recording) {
    const body = new FormData();
    body.set('csrfmiddlewaretoken', csrf);
    body.set('file', recording, 'recording.webm');
    try {
      await answer(await fetch(`${base}${encodeURIComponent(call.session)}/recording/`, { method: 'POST', body, credentials: 'same-origin' }));
      root.dataset.recording = 'stored';
      $('vc-recording').textContent = 'The recording is stored with the session.';
    } catch (error) {
      root.dataset.recording = 'failed';
      $('vc-recording').textContent = `The recording could not be stored: ${error.message}`;
    }
  }
  $('vc-available').disabled = false;
  await refreshArtifacts().catch(() => {});
  await refreshLobby().catch(() => {});
}

$('vc-hangup').addEventListener('click', () => void hangUp('You ended the call.', true));

$('vc-snapshot').addEventListener('click', () => {
  post(`${encodeURIComponent(call.session)}/snapshot/`)
    .then(() => say('Snapshot requested; it appears under the documents when it arrives.'))
    .catch((error) => say(error.message));
});

// The session's documents and their results, beside the video.
async function refreshArtifacts() {
  if (!call) return;
  const data = await answer(await fetch(`${base}${encodeURIComponent(call.session)}/artifacts.json`, { credentials: 'same-origin' }));
  const session = data.session;
  $('vc-session-state').textContent = `Session ${session.status}; received: ${session.succeeded_artifact_types.join(', ') || 'none'}; still needed: ${session.pending_artifact_types.join(', ') || 'none'}.`;
  const items = data.artifacts.map((artifact) => {
    const item = document.createElement('li');
    item.dataset.type = artifact.artifact_type;
    const title = document.createElement('strong');
    title.textContent = artifact.artifact_type;
    const result = document.createElement('span');
    result.className = 'vc-result';
    result.textContent = artifact.result ? ` ${artifact.result.code}: ${artifact.result.message}` : ' stored, no verification result';
    item.append(title, result);
    if (artifact.url) {
      const image = document.createElement('img');
      image.src = artifact.url;
      image.alt = `${artifact.artifact_type} taken ${artifact.created_at}`;
      image.loading = 'lazy';
      item.append(image);
    }
    return item;
  });
  $('vc-artifacts').replaceChildren(...items);
}

// The close form: end-kyc-session with the agent token, then the call ends.
$('vc-close').addEventListener('submit', (event) => {
  event.preventDefault();
  if (!call) return;
  const checklist = {};
  for (const box of document.querySelectorAll('#vc-close input[type=checkbox]')) checklist[box.name] = box.checked;
  const outcome = $('vc-close-status').value;
  $('vc-close-submit').disabled = true;
  fetch('/api/document/end-kyc-session/', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: call.token, status: outcome, checklist }) })
    .then(async (response) => {
      const body = await response.json();
      if (!response.ok) throw new Error(body.message || `The session could not be closed (${response.status}).`);
      await hangUp('The call is over.', true);
      root.dataset.closed = body.session_status;
      say(`The session is closed: ${body.session_status}.`);
    })
    .catch((error) => {
      $('vc-close-submit').disabled = false;
      say(error.message);
    });
});

void refreshLobby().catch((error) => say(error.message));
