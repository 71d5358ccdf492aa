'use strict';
/*
 * Progressive enhancement of the admin forms; every page works without it. A relation input
 * (data-autocomplete: the field's autocomplete URL) takes the ID of a record; typing in it asks
 * the server for the related records matching the text and offers them in the input's datalist,
 * labelled with their names. Choosing one puts its ID in the input and its name beside it.
 */
for (const input of document.querySelectorAll('input[data-autocomplete]')) {
  const list = document.getElementById(input.getAttribute('list') || '');
  const name = input.parentElement && input.parentElement.querySelector('.fk-repr');
  if (!list) continue;
  let timer = 0;
  let asked = null;

  const showName = () => {
    const chosen = [...list.options].find((option) => option.value === input.value);
    if (chosen && name) name.textContent = chosen.label;
  };

  const search = async () => {
    const term = input.value.trim();
    if (term === asked) return;
    asked = term;
    const response = await fetch(`${input.dataset.autocomplete}&q=${encodeURIComponent(term)}`, { headers: { accept: 'application/json' } });
    // A later keystroke has asked again: this answer is stale.
    if (!response.ok || asked !== term) return;
    const { results } = await response.json();
    list.replaceChildren(
      ...results.map((result) => {
        const option = document.createElement('option');
        option.value = result.value;
        option.label = result.text;
        return option;
      }),
    );
    showName();
  };

  input.addEventListener('input', () => {
    showName();
    clearTimeout(timer);
    timer = setTimeout(() => void search().catch(() => {}), 200);
  });
}

/*
 * The page's one connection to the staff live socket's web door (/admin/live/, signed in by the
 * session cookie), opened on signed-in pages (those carrying the notifications link) and shared by
 * whatever on the page listens: the notifications below, the video-call console
 * (window.wardenLive.on / send). A socket that drops is opened again, its listeners told
 * (`reconnected`) so they catch up; one closed because the session or account ended is not.
 */
window.wardenLive = (() => {
  const link = document.getElementById('notifications-link');
  if (!link || !link.dataset.idleSeconds || !('WebSocket' in window)) return null;
  // 4001 device revoked, 4003 account inactive, 4004 session ended: signing in again is the way back
  const FINAL_CLOSES = new Set([4001, 4003, 4004]);
  const listeners = new Set();
  let socket = null;
  let retryMs = 1000;
  // The socket's current login frame: a listener added after it (a later script) is told at once.
  let login = null;
  const open = (reconnected) => {
    socket = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/admin/live/`);
    socket.addEventListener('message', (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame.type === 'login') {
        retryMs = 1000;
        login = frame;
        document.documentElement.dataset.live = 'open';
      }
      for (const listener of listeners) listener(frame, reconnected);
    });
    socket.addEventListener('close', (event) => {
      login = null;
      document.documentElement.dataset.live = 'closed';
      if (FINAL_CLOSES.has(event.code)) return;
      setTimeout(() => open(true), retryMs);
      retryMs = Math.min(retryMs * 2, 30000);
    });
  };
  open(false);
  return {
    /** `listener(frame, reconnected)` for every frame: the login, broadcasts, replies. */
    on(listener) {
      listeners.add(listener);
      if (login) {
        const frame = login;
        queueMicrotask(() => listener(frame, false));
      }
    },
    /** Sends a frame when the socket is open; false when it is not. */
    send(frame) {
      if (!socket || socket.readyState !== WebSocket.OPEN) return false;
      socket.send(JSON.stringify(frame));
      return true;
    },
  };
})();

/*
 * Notifications: the header's unread count, and the inbox's first page while it is open, kept
 * current without reload. A `notification` broadcast for this user on the live socket makes the
 * page read /admin/notifications/unread.json and, when the count or the newest notification
 * changed, the inbox's section again. Those reads keep the session alive, so without the user
 * doing anything for half the session's idle timeout they wait until the user comes back. After
 * the socket was opened again, one catch-up read.
 */
(() => {
  const badge = document.getElementById('unread-count');
  const link = document.getElementById('notifications-link');
  const live = window.wardenLive;
  if (!badge || !link || !live) return;
  const firstRow = () => document.querySelector('#notifications-inbox tr[data-id]');
  let unread = badge.dataset.unread === '' ? null : Number(badge.dataset.unread);
  let newest = firstRow() ? firstRow().dataset.id : null;
  let stopped = false;
  let pending = false;
  const quietMs = Number(link.dataset.idleSeconds) * 500;
  let lastActivity = Date.now();
  const active = () => Date.now() - lastActivity <= quietMs;
  for (const type of ['pointerdown', 'keydown', 'scroll', 'focus']) {
    window.addEventListener(
      type,
      () => {
        lastActivity = Date.now();
        if (pending) void refresh();
      },
      { passive: true, capture: true },
    );
  }

  const show = (count) => {
    badge.textContent = count ? String(count) : '';
    badge.hidden = !count;
    const label = document.getElementById('unread-label');
    if (label) label.hidden = !count;
  };

  const refreshInbox = async () => {
    const inbox = document.getElementById('notifications-inbox');
    if (!inbox || inbox.dataset.page !== '1') return;
    const response = await fetch(location.pathname, { headers: { accept: 'text/html' }, credentials: 'same-origin' });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), 'text/html').getElementById('notifications-inbox');
    if (fresh) inbox.replaceWith(document.adoptNode(fresh));
  };

  const refresh = async () => {
    if (stopped) return;
    if (!active()) {
      pending = true;
      return;
    }
    pending = false;
    try {
      const response = await fetch('/admin/notifications/unread.json', { headers: { accept: 'application/json' }, credentials: 'same-origin' });
      // signed out (the login page) or refused: stop
      if (!response.ok || !(response.headers.get('content-type') || '').includes('json')) {
        stopped = true;
        return;
      }
      const answer = await response.json();
      const changed = answer.unread !== unread || (answer.newest_id !== newest && answer.newest_id !== null);
      unread = answer.unread;
      newest = answer.newest_id;
      show(unread);
      if (changed) await refreshInbox();
    } catch {
      pending = true;
    }
  };

  live.on((frame, reconnected) => {
    if ((frame.type === 'login' && reconnected) || (frame.event === 'broadcast' && frame.data && frame.data.type === 'notification')) void refresh();
  });
})();
