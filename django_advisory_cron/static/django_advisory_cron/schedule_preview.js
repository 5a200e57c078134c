"use strict";
// The next ticks of what the schedule form holds, as the cron expression, the interval, the
// one-off's moment (its date and time fields) or the time zone is typed: asked of the admin's preview/ view, shown in place of the saved ticks.
// Without this script a saved schedule's page still lists them.
document.addEventListener("DOMContentLoaded", () => {
    const box = document.querySelector(".next-ticks[data-preview]");
    if (!box) {
        return;
    }
    const fields = ["name", "cron", "every", "timezone", "at_0", "at_1", "calendar"]
        .map((name) => document.getElementById(`id_${name}`))
        .filter(Boolean);
    let timer = null;
    let asked = 0;

    function line(className, text, note) {
        const div = document.createElement("div");
        div.className = className;
        div.textContent = text;
        if (note) {
            const help = document.createElement("span");
            help.className = "help";
            help.textContent = ` ${note}`;
            div.append(help);
        }
        return div;
    }

    async function refresh() {
        const params = new URLSearchParams();
        for (const field of fields) {
            params.set(field.name, field.value);
        }
        const number = ++asked;
        const response = await fetch(`${box.dataset.preview}?${params}`, {
            credentials: "same-origin",
            headers: {Accept: "application/json"},
        });
        if (!response.ok || number !== asked) {
            return; // a later answer is coming, or the preview is not for this user
        }
        const data = await response.json();
        const lines = data.problems.length
            ? data.problems.map((problem) => line("next-tick-problem", problem))
            : data.ticks.map((tick) => line("next-tick", `${tick.when} ${tick.offset}`, tick.note));
        box.replaceChildren(...lines);
    }

    for (const field of fields) {
        for (const event of ["input", "change"]) {
            field.addEventListener(event, () => {
                clearTimeout(timer);
                timer = setTimeout(refresh, 250);
            });
        }
    }
});
