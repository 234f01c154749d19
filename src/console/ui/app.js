// The dlock console (docs/console.md): a hash router over the views, the namespace and token
// forms, and the refresh that keeps the open view live (once a second, no reload).

import { ApiError, setToken, token } from './api.js';
import { EventTail } from './events.js';
import { Delays, Elections, Events, Lock, Locks, Overview, Semaphores, Session, Sessions } from './views.js';

const REFRESH_MS = 1000;

const $ = (id) => document.getElementById(id);
const main = $('main');
const status = $('status');
const tail = new EventTail();

const app = {
  say(text) {
    status.classList.remove('error');
    status.removeAttribute('data-source');
    status.textContent = text;
  },
  // An error on the status line; `source` 'refresh' is cleared by the next refresh that works,
  // an action's error stays until the next message.
  fail(error, source = 'action') {
    status.classList.add('error');
    status.setAttribute('data-source', source);
    if (error instanceof ApiError && error.status === 401) {
      status.textContent = token()
        ? 'dlockd refused this token (401). Enter another above.'
        : 'This dlockd needs a bearer token (401): enter one above.';
    } else if (error instanceof ApiError && error.status === 403) {
      status.textContent = `Not allowed with this token (403): ${error.message}`;
    } else if (error instanceof ApiError) {
      status.textContent = `${error.status} ${error.code}: ${error.message}`;
    } else {
      status.textContent = `dlockd did not answer: ${error.message}`;
    }
  },
  // A modal yes/no (the admin actions); resolves true only for the confirming button.
  confirm(title, text, action) {
    const dialog = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = action;
    return new Promise((resolve) => {
      const done = (answer) => {
        $('confirm-ok').onclick = null;
        $('confirm-cancel').onclick = null;
        dialog.onclose = null;
        if (dialog.open) dialog.close();
        resolve(answer);
      };
      $('confirm-ok').onclick = () => done(true);
      $('confirm-cancel').onclick = () => done(false);
      dialog.onclose = () => done(false);
      dialog.showModal();
      $('confirm-cancel').focus();
    });
  },
};

function scope() {
  return { ns: $('ns').value.trim() || 'default', prefix: $('prefix').value };
}

// #/locks, #/lock/<ns>/<key>, #/session/<id>, ... -> a view.
function viewOf(hash) {
  const [name, ...rest] = hash.replace(/^#\/?/, '').split('/').map((part) => decodeURIComponent(part));
  switch (name) {
    case 'locks': return new Locks();
    case 'lock': return new Lock(app, rest[0], rest.slice(1).join('/'));
    case 'sessions': return new Sessions();
    case 'session': return new Session(rest[0]);
    case 'elections': return new Elections();
    case 'semaphores': return new Semaphores();
    case 'delays': return new Delays(app);
    case 'events': return new Events(tail);
    default: return new Overview();
  }
}

let view = null;
let refreshing = false;

async function refresh() {
  if (refreshing) return;
  refreshing = true;
  const current = view;
  try {
    await Promise.all([current.refresh(scope()), tail.poll(scope())]);
    if (current === view) {
      if (status.getAttribute('data-source') === 'refresh') app.say('');
      main.setAttribute('data-refreshed', String(Date.now()));
    }
  } catch (error) {
    if (current === view) app.fail(error, 'refresh');
  } finally {
    refreshing = false;
  }
}

function show(focus) {
  view = viewOf(location.hash);
  const section = location.hash.replace(/^#\/?/, '').split('/')[0] || 'overview';
  for (const a of document.querySelectorAll('nav a')) {
    const current = a.getAttribute('href') === `#/${section}` ||
      (section === 'lock' && a.getAttribute('href') === '#/locks') ||
      (section === 'session' && a.getAttribute('href') === '#/sessions');
    if (current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren(view.node);
  document.title = `${view.node.querySelector('h1').textContent} · dlock console`;
  if (focus) view.node.querySelector('h1').focus();
  refresh();
}

function showToken() {
  $('token-state').textContent = token() ? 'A token is set for this tab.' : 'No token set.';
}

$('scope').addEventListener('submit', (event) => {
  event.preventDefault();
  refresh();
});
$('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  setToken($('token').value.trim());
  $('token').value = '';
  showToken();
  app.say('');
  refresh();
});
$('forget-token').addEventListener('click', () => {
  setToken('');
  showToken();
  refresh();
});
window.addEventListener('hashchange', () => show(true));

showToken();
show(false);
setInterval(refresh, REFRESH_MS);
