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
