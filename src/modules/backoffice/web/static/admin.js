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
 * current without reload. The page asks /admin/notifications/unread.json every few seconds while
 * it is visible and the user is not idle (the web session cannot log in to the staff live socket,
 * which takes a device token); when the count or the newest notification changed, the inbox's
 * section is read again and swapped in.
 */
(() => {
  const badge = document.getElementById('unread-count');
  const link = document.getElementById('notifications-link');
  // Only pages rendered behind the notifications pages carry the settings (not the shell's own
  // error pages, nor a shell mounted without them, where unread.json does not exist).
  if (!badge || !link || !link.dataset.idleSeconds) return;
  const every = 5000;
  const firstRow = () => document.querySelector('#notifications-inbox tr[data-id]');
  let unread = badge.dataset.unread === '' ? null : Number(badge.dataset.unread);
  let newest = firstRow() ? firstRow().dataset.id : null;
  let stopped = false;
  // Every request keeps the session alive: without the user doing anything for half the session's
  // idle timeout, the page stops asking until they do.
  const quietMs = Number(link.dataset.idleSeconds) * 500;
  let lastActivity = Date.now();
  for (const type of ['pointerdown', 'keydown', 'scroll', 'focus']) {
    window.addEventListener(type, () => (lastActivity = Date.now()), { passive: true, capture: true });
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

  const poll = async () => {
    if (stopped || document.hidden || Date.now() - lastActivity > quietMs) return;
    try {
      const response = await fetch('/admin/notifications/unread.json', { headers: { accept: 'application/json' }, credentials: 'same-origin' });
      // signed out (the login page) or refused: stop asking
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
      // a network hiccup: try again next time
    }
  };

  void poll();
  setInterval(poll, every);
})();
