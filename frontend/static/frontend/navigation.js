// The header's menu button: on narrow screens the menu folds behind it (CSS decides when; see onefold.css).
// Without JavaScript the menu simply stays open.
(function () {
  "use strict";
  document.documentElement.classList.add("js-navigation");

  function start() {
    var button = document.querySelector(".menu-button");
    var menu = document.getElementById("site-menu");
    if (!button || !menu) { return; }
    button.addEventListener("click", function () {
      var open = button.getAttribute("aria-expanded") !== "true";
      button.setAttribute("aria-expanded", String(open));
      menu.classList.toggle("site-menu-open", open);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
