// capture web interface: live lists, copy and reveal buttons,
// confirmations, local times and keyboard shortcuts. Every page works
// without this script; it only makes them quicker to use.
(() => {
  "use strict";

  // Controls that need the script are hidden in the HTML until it runs.
  for (const el of document.querySelectorAll("[data-needs-js]")) el.hidden = false;

  // Times arrive in UTC; show them in the reader's zone: the time alone
  // for today, the date too otherwise.
  const pad = (n) => String(n).padStart(2, "0");
  function localTime(el) {
    const d = new Date(el.getAttribute("datetime"));
    if (Number.isNaN(d.getTime())) return;
    const now = new Date();
    const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    const sameDay = d.toDateString() === now.toDateString();
    el.textContent = sameDay ? hms
      : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hms}`;
    el.title = d.toString();
  }
  document.querySelectorAll("time[datetime]").forEach(localTime);

  // A page that answers a form (a replay) takes back its own address, so
  // that a reload shows the request again instead of resending the form.
  const own = document.querySelector("[data-own-url]");
  if (own) history.replaceState(null, "", own.dataset.ownUrl);

  // The sidebar (a scrolling row on narrow screens) and the tabs show
  // where we are: each scrolls within itself, never the page, which may
  // have been sent to a fragment.
  for (const current of document.querySelectorAll(".side [aria-current], .tabs [aria-current]")) {
    const strip = current.closest(".side, .tabs");
    const s = strip.getBoundingClientRect();
    const c = current.getBoundingClientRect();
    if (c.left < s.left || c.right > s.right) strip.scrollLeft += c.left - s.left - 12;
    if (c.top < s.top || c.bottom > s.bottom) strip.scrollTop += c.top - s.top - 12;
  }

  // A tab, or a choice of view, opens a page of its own: focus comes back
  // to it there, as if the page had not changed under the keyboard.
  const refocus = sessionStorage.getItem("capture-refocus");
  if (refocus) {
    sessionStorage.removeItem("capture-refocus");
    document.getElementById(refocus)?.focus();
  }
  document.addEventListener("click", (e) => {
    const el = e.target.closest?.("[data-tablist] [role=tab], [data-refocus]");
    if (el?.id) sessionStorage.setItem("capture-refocus", el.id);
  });

  // A tab list is one stop in the Tab order, at its selected tab; arrow
  // keys move within it (below). Without this script every tab is a link
  // of its own, reached with Tab.
  for (const list of document.querySelectorAll("[data-tablist]")) {
    for (const t of list.querySelectorAll("[role=tab]")) {
      t.tabIndex = t.getAttribute("aria-selected") === "true" ? 0 : -1;
    }
  }

  // Ask before destructive forms are sent. Without this script the server
  // asks instead, on a page of its own, for a form not marked confirmed.
  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!form.hasAttribute("data-confirm")) return;
    if (!window.confirm(form.elements.question?.value || "Are you sure?")) {
      e.preventDefault();
      return;
    }
    let confirmed = form.elements.confirmed;
    if (!confirmed) {
      confirmed = Object.assign(document.createElement("input"), { type: "hidden", name: "confirmed" });
      form.append(confirmed);
    }
    confirmed.value = "yes";
  });

  const statusNear = (el) => el.closest(".copy-row")?.querySelector(".copied");
  function say(el, text) {
    const status = statusNear(el);
    if (!status) return;
    status.textContent = text;
    clearTimeout(status._timer);
    status._timer = setTimeout(() => { status.textContent = ""; }, 2500);
  }

  async function fetchText(url) {
    const resp = await fetch(url, { headers: { "X-Requested-With": "fetch" }, cache: "no-store" });
    if (!resp.ok) {
      // Errors come as the read API's envelope; its message says what to do.
      let message = "";
      try { message = (await resp.json()).error.message; } catch { /* not an envelope */ }
      throw new Error(message || resp.statusText);
    }
    return resp.text();
  }

  // What a copy button copies: a field's value, or an element's text. A
  // secret field is empty until revealed; its value comes from its URL.
  async function secretValue(input) {
    if (!("value" in input)) return input.textContent;
    if (input.value === "" && input.dataset.secretUrl) {
      input.value = await fetchText(input.dataset.secretUrl);
    }
    return input.value;
  }

  async function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    // Plain http on another host: no clipboard API, so copy a selection.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "sr-only";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    if (!ok) throw new Error("copy refused");
  }

  document.addEventListener("click", async (e) => {
    const btn = e.target.closest("button[data-copy]");
    if (!btn) return;
    const source = document.getElementById(btn.dataset.copy);
    if (!source) return;
    try {
      await copyText(await secretValue(source));
      say(btn, "Copied");
    } catch (err) {
      say(btn, "Copy failed: " + err.message);
    }
  });

  // Filters leave empty fields out of the address.
  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!form.classList.contains("filters") || e.defaultPrevented) return;
    for (const field of form.elements) {
      if (field.name && field.value === "") field.disabled = true;
    }
  });

  // A page restored from the back-forward cache gets its fields back.
  window.addEventListener("pageshow", () => {
    for (const field of document.querySelectorAll("form.filters [disabled]")) field.disabled = false;
  });

  // Reveal fetches the password into its field instead of reloading, and
  // Hide masks it again (the value stays, for the copy button).
  document.addEventListener("submit", async (e) => {
    const form = e.target;
    if (!form.dataset.reveal || e.defaultPrevented) return;
    const input = document.getElementById(form.dataset.reveal);
    if (!input) return;
    e.preventDefault();
    const btn = form.querySelector("button");
    if (input.type !== "password") {
      input.type = "password";
      btn.textContent = "Reveal";
      return;
    }
    try {
      await secretValue(input);
      input.type = "text";
      btn.textContent = "Hide";
    } catch (err) {
      say(form, "Reveal failed: " + err.message);
    }
  });

  // Load images swaps the frame's address instead of reloading the page.
  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!form.hasAttribute("data-load-images") || e.defaultPrevented) return;
    const frame = document.querySelector("iframe.mail-html");
    if (!frame) return;
    e.preventDefault();
    const url = new URL(frame.src, location.href);
    url.searchParams.set("images", "1");
    frame.src = url.toString();
    form.hidden = true;
    // The button is gone: focus goes to the tab of what it changed.
    document.querySelector("[data-tablist] [aria-selected=true]")?.focus();
    const page = new URL(location.href);
    page.searchParams.set("tab", "html");
    page.searchParams.set("images", "1");
    history.replaceState(null, "", page);
  });

  // Live lists: the server sends each new capture as a rendered row.
  const list = document.querySelector("ul[data-live]");
  if (list && window.EventSource) {
    const maxRows = Number(list.dataset.keep) || 300;
    const empty = document.querySelector("[data-empty]");
    const dot = document.querySelector("[data-live-status]");
    // The count is the whole inbox's or endpoint's, which the stream
    // sends as it changes (a filtered page receives rows only for the
    // captures that match); a filtered page also says, to a screen
    // reader, how many new ones matched. Both sit in the list's polite
    // status, which announces the change.
    const countEl = document.querySelector("[data-count]");
    const arrivalsEl = document.querySelector("[data-arrivals]");
    let arrivals = 0;
    // The sidebar's count of this inbox or endpoint, set with it.
    const sideCount = document.querySelector(".side a[aria-current=page] .count");
    const onTotal = (ev) => {
      const { count, side } = JSON.parse(ev.data);
      // Set only when changed, so that nothing is announced again.
      if (countEl && countEl.textContent !== count) countEl.textContent = count;
      if (sideCount && sideCount.textContent !== side) sideCount.textContent = side;
    };
    const onRow = (ev) => {
      const tpl = document.createElement("template");
      tpl.innerHTML = ev.data.trim();
      const item = tpl.content.firstElementChild;
      const row = item?.querySelector("[data-id]");
      if (!row || list.querySelector(`[data-id="${CSS.escape(row.dataset.id)}"]`)) return;
      row.classList.add("new");
      item.querySelectorAll("time[datetime]").forEach(localTime);
      list.prepend(item);
      while (list.children.length > maxRows) list.lastElementChild.remove();
      if (empty) empty.hidden = true;
      if (arrivalsEl) {
        arrivals++;
        arrivalsEl.textContent = `, ${arrivals} new ${arrivals === 1 ? "match" : "matches"}`;
      }
    };
    // A row's mark (a request's last delivery) changed after it arrived.
    const onMark = (ev) => {
      const { id, html } = JSON.parse(ev.data);
      const cell = list.querySelector(`[data-id="${CSS.escape(id)}"] [data-mark]`);
      if (!cell) return;
      const tpl = document.createElement("template");
      tpl.innerHTML = html;
      // Compared as the browser writes both, so an unchanged mark (sent
      // again after a reconnect) leaves the row alone.
      if (tpl.innerHTML === cell.innerHTML) return;
      cell.replaceChildren(tpl.content);
      cell.firstElementChild?.classList.add("changed");
    };
    // A browser opens at most six connections to a server over HTTP/1.1,
    // and each open stream holds one: a tab in the background gives its
    // stream up, and takes it again, from the last capture it showed,
    // when it is looked at.
    let source = null;
    let lastID = "";
    // A form on its way is where the page goes next: signing out ends the
    // stream with "reload", which must not cut that navigation short.
    // (Registered after the handlers that keep a form on the page.)
    let leaving = false;
    document.addEventListener("submit", (e) => { if (!e.defaultPrevented) leaving = true; });
    window.addEventListener("pageshow", () => { leaving = false; }); // back from the cache
    const open = () => {
      if (source || document.hidden) return;
      const url = new URL(list.dataset.live, location.href);
      if (lastID) url.searchParams.set("after", lastID);
      source = new EventSource(url);
      source.addEventListener("open", () => { if (dot) dot.hidden = false; });
      source.addEventListener("error", () => { if (dot) dot.hidden = true; });
      source.addEventListener("row", (ev) => {
        if (ev.lastEventId) lastID = ev.lastEventId;
        onRow(ev);
      });
      source.addEventListener("mark", onMark);
      source.addEventListener("total", onTotal);
      source.addEventListener("reload", () => { if (!leaving) location.reload(); });
    };
    const close = () => {
      if (!source) return;
      source.close();
      source = null;
      if (dot) dot.hidden = true;
    };
    document.addEventListener("visibilitychange", () => (document.hidden ? close() : open()));
    window.addEventListener("pagehide", close);
    window.addEventListener("pageshow", open);
    open();
  }

  // An open menu (the project switcher) closes once the focus moves on
  // past it or a click lands outside it: left open, its list covers the
  // controls the focus then reaches, on a phone most of them. Only a
  // focus that lands somewhere else closes it (a click inside that
  // focuses nothing, as Safari's on a link, must reach the link).
  for (const menu of document.querySelectorAll("details.menu")) {
    menu.addEventListener("focusout", (e) => {
      if (menu.open && e.relatedTarget && !menu.contains(e.relatedTarget)) menu.open = false;
    });
  }
  document.addEventListener("pointerdown", (e) => {
    for (const menu of document.querySelectorAll("details.menu[open]")) {
      if (!menu.contains(e.target)) menu.open = false;
    }
  });

  // Keyboard: "/" searches, j and k move through a list, Enter opens
  // (rows are links), Escape leaves a field.
  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    const typing = e.target.closest?.("input, textarea, select, [contenteditable]");
    if (typing) {
      if (e.key === "Escape") e.target.blur();
      return;
    }
    if (e.key === "Escape") {
      // Escape closes an open menu (the project switcher), its summary
      // keeping the focus.
      const menu = document.querySelector("details.menu[open]");
      if (menu) {
        menu.open = false;
        menu.querySelector("summary")?.focus();
        return;
      }
    }
    if (e.key === "/") {
      const search = document.querySelector("[data-search]");
      if (search) {
        e.preventDefault();
        search.focus();
        search.select();
      }
      return;
    }
    const tab = e.target.closest?.("[data-tablist] [role=tab]");
    if (tab && e.key === " ") {
      // Space activates a tab, as Enter does.
      e.preventDefault();
      tab.click();
      return;
    }
    if (tab && ["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) {
      // Arrow keys move between the tabs; Enter opens one (each is a link).
      const tabs = [...tab.parentElement.querySelectorAll("[role=tab]")];
      const at = tabs.indexOf(tab);
      const next = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: tabs.length - 1 }[e.key];
      const to = tabs[(next + tabs.length) % tabs.length];
      for (const t of tabs) t.tabIndex = t === to ? 0 : -1;
      to.focus();
      e.preventDefault();
      return;
    }
    if (e.key === "j" || e.key === "k") {
      const rows = [...document.querySelectorAll("a.row")];
      if (rows.length === 0) return;
      const at = rows.indexOf(document.activeElement);
      const next = at < 0 ? 0 : Math.min(Math.max(at + (e.key === "j" ? 1 : -1), 0), rows.length - 1);
      rows[next].focus();
      e.preventDefault();
    }
  });
})();
