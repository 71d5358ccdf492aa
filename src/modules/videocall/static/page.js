// The /kyc/call/ page: the call module in the page's own <main>, token and relay=1 from the URL.
import { startCall } from './call.js';

const params = new URLSearchParams(location.search);
const container = document.getElementById('call');
const token = params.get('token');
if (token) {
  // Kept on window for diagnostics (the browser test reads the connection's statistics).
  window.wardenCall = startCall({ token, container, relay: params.get('relay') === '1' });
} else {
  const message = document.createElement('p');
  message.setAttribute('role', 'alert');
  message.textContent = 'This link is incomplete: open the link you were given again.';
  container.append(message);
}
