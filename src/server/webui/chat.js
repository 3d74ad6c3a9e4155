// The chat page of `chimera serve` (docs/SERVER.md, "Web UI").
//
// Streams POST /v1/chat/completions (fetch + server-sent events), keeps the
// conversations, the settings and the API key in this browser's localStorage,
// and never turns user or model text into markup: every text goes in with
// textContent. The Stop button aborts the fetch; the server sees the closed
// connection and cancels the generation.
//
// For tests (tests/browser): <body data-state="idle|streaming">; once a reply
// ends, data-outcome="done|stopped|error" and data-replies counts the replies
// ended so far; #stats has data-tokens.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const KEY_CONVERSATIONS = 'chimera.conversations';
  const KEY_CURRENT = 'chimera.current';
  const KEY_SETTINGS = 'chimera.settings';
  const KEY_API_KEY = 'chimera.apiKey';
  const SETTINGS = ['system', 'temperature', 'top_p', 'max_tokens', 'seed', 'extra'];
  const RESERVED = ['messages', 'stream', 'stream_options'];  // the page sets these itself
  const NEW_TITLE = 'New chat';

  function load(key, fallback) {
    try {
      const v = localStorage.getItem(key);
      return v === null ? fallback : JSON.parse(v);
    } catch (e) {
      return fallback;
    }
  }
  function store(key, value) {
    try {
      localStorage.setItem(key, JSON.stringify(value));
    } catch (e) {
      showStatus('Could not save in this browser (localStorage): ' + e.message);
    }
  }

  let conversations = load(KEY_CONVERSATIONS, []);  // [{id, title, messages: [{role, content, stopped}]}]
  if (!Array.isArray(conversations)) conversations = [];
  let currentId = load(KEY_CURRENT, null);
  let controller = null;  // AbortController of the reply being streamed

  const current = () => conversations.find((c) => c.id === currentId) || null;
  const apiKey = () => $('api-key').value.trim();
  const persist = () => {
    store(KEY_CONVERSATIONS, conversations);
    store(KEY_CURRENT, currentId);
  };

  // The message line; `from` names who showed it, so the model check clears only its own message.
  let statusFrom = '';
  function showStatus(text, from) {
    $('status').textContent = text;
    statusFrom = from || '';
  }

  function setState(state, outcome) {
    document.body.dataset.state = state;
    if (outcome !== undefined) document.body.dataset.outcome = outcome;
    const busy = state === 'streaming';
    $('send').disabled = busy;
    $('stop').disabled = !busy;
  }

  function endReply(outcome) {
    setState('idle', outcome);
    document.body.dataset.replies = String(Number(document.body.dataset.replies || 0) + 1);
  }

  // ---- rendering (textContent only) ----

  function messageElement(role, content, stopped) {
    const el = document.createElement('div');
    el.className = 'msg ' + (role === 'user' ? 'user' : 'assistant') + (stopped ? ' stopped' : '');
    el.dataset.role = role;
    const r = document.createElement('div');
    r.className = 'role';
    r.textContent = role;
    const c = document.createElement('div');
    c.className = 'content';
    c.textContent = content;
    el.append(r, c);
    return el;
  }

  function renderMessages() {
    const box = $('messages');
    box.replaceChildren();
    const conv = current();
    if (conv) for (const m of conv.messages) box.append(messageElement(m.role, m.content, m.stopped));
    box.scrollTop = box.scrollHeight;
  }

  function renderConversations() {
    const list = $('conversations');
    list.replaceChildren();
    for (const conv of conversations) {
      const li = document.createElement('li');
      li.dataset.id = conv.id;
      if (conv.id === currentId) li.className = 'current';
      const title = document.createElement('button');
      title.type = 'button';
      title.className = 'title';
      title.textContent = conv.title;
      title.title = conv.title;
      title.addEventListener('click', () => selectConversation(conv.id));
      const del = document.createElement('button');
      del.type = 'button';
      del.className = 'delete';
      del.textContent = '\u00d7';
      del.setAttribute('aria-label', 'Delete conversation');
      del.addEventListener('click', () => deleteConversation(conv.id));
      li.append(title, del);
      list.append(li);
    }
  }

  function renderAll() {
    renderConversations();
    renderMessages();
  }

  // ---- conversations ----

  function stopStreaming() {
    if (controller) controller.abort();
  }

  function newConversation() {
    const conv = {id: Date.now().toString(36) + Math.random().toString(36).slice(2, 8), title: NEW_TITLE, messages: []};
    conversations.unshift(conv);
    currentId = conv.id;
    persist();
    return conv;
  }

  function selectConversation(id) {
    stopStreaming();
    currentId = id;
    persist();
    showStatus('');
    renderAll();
  }

  function deleteConversation(id) {
    if (current() && current().id === id) stopStreaming();
    conversations = conversations.filter((c) => c.id !== id);
    if (currentId === id) currentId = conversations.length ? conversations[0].id : null;
    persist();
    renderAll();
  }

  // ---- settings ----

  function saveSettings() {
    const s = {};
    for (const id of SETTINGS) s[id] = $(id).value;
    store(KEY_SETTINGS, s);
  }

  function loadSettings() {
    const s = load(KEY_SETTINGS, {});
    if (s && typeof s === 'object')
      for (const id of SETTINGS) if (typeof s[id] === 'string') $(id).value = s[id];
    const k = load(KEY_API_KEY, '');
    if (typeof k === 'string') $('api-key').value = k;
  }

  function numberSetting(id, integer) {
    const raw = $(id).value.trim();
    if (raw === '') return undefined;
    const v = Number(raw);
    if (!Number.isFinite(v) || (integer && !Number.isInteger(v)))
      throw new Error('Settings: ' + id + ' must be ' + (integer ? 'an integer' : 'a number') + ' (got "' + raw + '")');
    return v;
  }

  function requestBody(conv) {
    const body = {messages: [], stream: true, stream_options: {include_usage: true}};
    const system = $('system').value;
    if (system.trim() !== '') body.messages.push({role: 'system', content: system});
    for (const m of conv.messages) body.messages.push({role: m.role, content: m.content});
    for (const [id, integer] of [['temperature', false], ['top_p', false], ['max_tokens', true], ['seed', true]]) {
      const v = numberSetting(id, integer);
      if (v !== undefined) body[id] = v;
    }
    const raw = $('extra').value.trim();
    if (raw !== '') {
      let extra;
      try {
        extra = JSON.parse(raw);
      } catch (e) {
        throw new Error('Settings: extra request fields are not valid JSON: ' + e.message);
      }
      if (extra === null || typeof extra !== 'object' || Array.isArray(extra))
        throw new Error('Settings: extra request fields must be a JSON object');
      for (const k of RESERVED)
        if (k in extra) throw new Error('Settings: extra request fields must not set "' + k + '" (the page sets it)');
      Object.assign(body, extra);
    }
    return body;
  }

  function headers() {
    const h = {'Content-Type': 'application/json'};
    if (apiKey() !== '') h.Authorization = 'Bearer ' + apiKey();
    return h;
  }

  // ---- HTTP ----

  async function httpError(res) {
    let detail = '';
    try {
      const j = await res.json();
      if (j && j.error && typeof j.error.message === 'string') detail = j.error.message;
    } catch (e) { /* not JSON */ }
    if (res.status === 401) {
      const what = apiKey() === '' ? 'This server requires an API key: enter it under Settings \u2192 API key.'
                                   : 'The server refused the API key: check it under Settings \u2192 API key.';
      return new Error('401 Unauthorized. ' + what + (detail ? ' (' + detail + ')' : ''));
    }
    return new Error('HTTP ' + res.status + (detail ? ': ' + detail : ''));
  }

  // Reads a text/event-stream body; calls onData(json) per `data:` event. True once [DONE] arrived.
  async function readEvents(res, onData) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return false;
      buf += decoder.decode(value, {stream: true}).replace(/\r\n?/g, '\n');
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
        if (data.length === 0) continue;  // a comment (keep-alive)
        const text = data.join('\n');
        if (text === '[DONE]') return true;
        onData(JSON.parse(text));
      }
    }
  }

  async function refreshModel() {
    try {
      const res = await fetch('/v1/models', {headers: headers()});
      if (!res.ok) {
        $('model').textContent = 'model: ?';
        showStatus((await httpError(res)).message, 'models');
        return;
      }
      const j = await res.json();
      $('model').textContent = 'model: ' + (j.data && j.data[0] ? j.data[0].id : '?');
      if (statusFrom === 'models') showStatus('');
    } catch (e) {
      $('model').textContent = 'model: ?';
      showStatus('Cannot reach the server: ' + e.message, 'models');
    }
  }

  // ---- sending ----

  // "N tokens in S s · R tok/s · first token after T ms": R over the whole
  // request (sent to last token); tokens from the server's usage (≈: counted
  // chunks, when a stopped reply has none).
  function showStats(tokens, t0, tFirst, tEnd, exact) {
    const stats = $('stats');
    stats.dataset.tokens = String(tokens);
    const secs = (tEnd - t0) / 1000;
    let text = (exact ? '' : '\u2248') + tokens + ' tokens in ' + secs.toFixed(2) + ' s';
    if (secs > 0) text += ' \u00b7 ' + (tokens / secs).toFixed(1) + ' tok/s';
    if (tFirst !== null) text += ' \u00b7 first token after ' + Math.round(tFirst - t0) + ' ms';
    stats.textContent = text;
  }

  // Shows streamed text without laying the page out again for every token (a
  // small model sends thousands per second): pieces are appended to one text
  // node at most every 50 ms.
  function streamInto(el) {
    const node = document.createTextNode('');
    el.replaceChildren(node);
    let pending = '', timer = null;
    const flush = () => {
      timer = null;
      if (pending === '') return;
      node.appendData(pending);
      pending = '';
      const box = $('messages');
      box.scrollTop = box.scrollHeight;
    };
    return {
      add(piece) {
        pending += piece;
        if (timer === null) timer = setTimeout(flush, 50);
      },
      end() {
        if (timer !== null) clearTimeout(timer);
        flush();
      },
    };
  }

  async function send(text) {
    if (controller) return;
    const conv = current() || newConversation();
    conv.messages.push({role: 'user', content: text});
    let body;
    try {
      body = requestBody(conv);
    } catch (e) {
      conv.messages.pop();
      $('input').value = text;
      showStatus(e.message);
      endReply('error');
      return;
    }
    if (conv.title === NEW_TITLE) conv.title = text.replace(/\s+/g, ' ').trim().slice(0, 40) || NEW_TITLE;
    persist();
    renderAll();
    showStatus('');
    $('stats').textContent = '';
    delete $('stats').dataset.tokens;
    const box = $('messages');
    const el = messageElement('assistant', '', false);
    box.append(el);
    const sink = streamInto(el.querySelector('.content'));

    controller = new AbortController();
    setState('streaming', '');
    let reply = '', chunks = 0, usage = null, tFirst = null, outcome = 'done', error = null;
    const t0 = performance.now();
    try {
      const res = await fetch('/v1/chat/completions',
                              {method: 'POST', headers: headers(), body: JSON.stringify(body), signal: controller.signal});
      if (!res.ok) throw await httpError(res);
      const finished = await readEvents(res, (j) => {
        if (j.error) throw new Error('The server reported an error: ' + (j.error.message || JSON.stringify(j.error)));
        if (j.usage) usage = j.usage;
        const choice = j.choices && j.choices[0];
        const piece = choice && choice.delta && typeof choice.delta.content === 'string' ? choice.delta.content : '';
        if (piece === '') return;
        if (tFirst === null) tFirst = performance.now();
        chunks += 1;
        reply += piece;
        sink.add(piece);
      });
      if (!finished) throw new Error('The reply stream ended early (the server stopped?)');
    } catch (e) {
      if (e.name === 'AbortError') {
        outcome = 'stopped';
      } else {
        outcome = 'error';
        error = e;
      }
    }
    const tEnd = performance.now();
    sink.end();
    controller = null;
    if (outcome === 'error') {
      // Nothing was answered: take the message back into the input box.
      el.remove();
      const last = conv.messages[conv.messages.length - 1];
      if (last && last.role === 'user' && last.content === text) conv.messages.pop();
      if ($('input').value === '') $('input').value = text;
      showStatus(error.message);
    } else {
      const stopped = outcome === 'stopped';
      if (reply !== '' || !stopped) conv.messages.push({role: 'assistant', content: reply, stopped});
      showStats(usage ? usage.completion_tokens : chunks, t0, tFirst, tEnd, !!usage);
    }
    persist();
    if (current() === conv) renderMessages();
    renderConversations();
    endReply(outcome);
  }

  // ---- wiring ----

  function init() {
    loadSettings();
    for (const id of SETTINGS) $(id).addEventListener('input', saveSettings);
    $('api-key').addEventListener('input', () => store(KEY_API_KEY, $('api-key').value));
    $('api-key').addEventListener('change', refreshModel);
    $('settings').addEventListener('submit', (ev) => ev.preventDefault());
    $('toggle-settings').addEventListener('click', () => {
      const s = $('settings');
      s.hidden = !s.hidden;
      $('toggle-settings').setAttribute('aria-expanded', String(!s.hidden));
    });
    $('new-chat').addEventListener('click', () => {
      stopStreaming();
      newConversation();
      showStatus('');
      renderAll();
      $('input').focus();
    });
    $('composer').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const text = $('input').value;
      if (text.trim() === '' || controller) return;
      $('input').value = '';
      send(text);
    });
    $('input').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        $('composer').requestSubmit();
      }
    });
    $('stop').addEventListener('click', stopStreaming);
    if (!current()) currentId = conversations.length ? conversations[0].id : null;
    renderAll();
    setState('idle', '');
    refreshModel();
  }

  init();
})();
