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
 * Notifications: the header's unread count, and the inbox's first page while it is open, kept
 * current without reload. The page keeps the staff live socket open at /admin/live/ (signed in
 * by the session cookie); a `notification` broadcast for this user makes it read
 * /admin/notifications/unread.json and, when the count or the newest notification changed, the
 * inbox's section again. Those reads keep the session alive, so without the user doing anything
 * for half the session's idle timeout they wait until the user comes back. A socket that drops is
 * opened again (with a catch-up read); one closed because the session ended is not.
 */
(() => {
  const badge = document.getElementById('unread-count');
  const link = document.getElementById('notifications-link');
  // Only pages rendered behind the notifications pages carry the settings (not the shell's own
  // error pages, nor a shell mounted without them, where unread.json does not exist).
  if (!badge || !link || !link.dataset.idleSeconds || !('WebSocket' in window)) return;
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

  // 4001 device revoked, 4003 account inactive, 4004 session ended: signing in again is the way back
  const FINAL_CLOSES = new Set([4001, 4003, 4004]);
  let retryMs = 1000;
  const connect = (catchUp) => {
    const socket = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/admin/live/`);
    socket.addEventListener('message', (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame.type === 'login') {
        retryMs = 1000;
        document.documentElement.dataset.live = 'open';
        if (catchUp) void refresh();
      } else if (frame.event === 'broadcast' && frame.data && frame.data.type === 'notification') {
        void refresh();
      }
    });
    socket.addEventListener('close', (event) => {
      document.documentElement.dataset.live = 'closed';
      if (stopped || FINAL_CLOSES.has(event.code)) return;
      setTimeout(() => connect(true), retryMs);
      retryMs = Math.min(retryMs * 2, 30000);
    });
  };
  connect(false);
})();
