// Refreshes a live page's <main> in place every 10 s while the tab is visible, so scrolling,
// forms being filled and open <details> are not thrown away by a full reload.
(function () {
  const every = 10000;
  async function refresh() {
    const main = document.querySelector("main[data-live]");
    if (!main || document.visibilityState !== "visible") return;
    if (main.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return;
    try {
      const r = await fetch(location.href, { credentials: "same-origin", headers: { "X-Refresh": "1" } });
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      const fresh = doc.querySelector("main[data-live]");
      if (fresh) main.replaceWith(fresh);
    } catch (e) { /* the next tick tries again */ }
  }
  setInterval(refresh, every);
})();
