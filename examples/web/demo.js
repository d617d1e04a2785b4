// The demo page: load the compiled classifier, run it on WebGPU, show the answers and the time
// each kernel takes. window.mimirDemo holds the outcome (the tests read it).
import { load, evaluate } from '../../js/src/index.js';

const status = document.getElementById('status');
window.mimirDemo = { state: 'running' };

async function main() {
  const data = await (await fetch('data.json')).json();
  const model = await load('kernels/classify.manifest.json');
  const inputs = Object.fromEntries(Object.entries(data.inputs).map(([k, v]) => [k, Float32Array.from(v)]));
  // The outputs, and every launch timed alone (median of 5).
  const { outputs, kernels } = await model.profile(inputs, data.dims, { repeat: 5 });
  const probs = outputs.out;

  const samples = document.getElementById('samples');
  const predictions = [];
  data.labels.forEach((label, b) => {
    const row = probs.subarray(b * 10, b * 10 + 10);
    const best = row.indexOf(Math.max(...row));
    predictions.push(best);
    const figure = document.createElement('figure');
    if (best !== label) figure.className = 'wrong';
    const canvas = document.createElement('canvas');
    canvas.width = canvas.height = 8;
    canvas.style.width = canvas.style.height = '64px';
    const ctx = canvas.getContext('2d');
    for (let i = 0; i < 64; i += 1) {
      ctx.fillStyle = data.inputs.x[b * 64 + i] > 0.5 ? '#222' : '#fff';
      ctx.fillRect(i % 8, Math.floor(i / 8), 1, 1);
    }
    const caption = document.createElement('figcaption');
    caption.textContent = `says ${best} (${(100 * row[best]).toFixed(1)}%)`;
    const bar = document.createElement('div');
    bar.className = 'bar';
    bar.style.width = `${Math.round(64 * row[best])}px`;
    figure.append(canvas, caption, bar);
    samples.append(figure);
  });

  const body = document.querySelector('#kernels tbody');
  const dims = data.dims;
  kernels.forEach((k, i) => {
    const entry = model.manifest.kernels.find((e) => e.entry_point === k.entryPoint);
    const groups = entry.workgroups.map((w) => evaluate(w, dims)).join(' × ');
    const tr = document.createElement('tr');
    tr.innerHTML = `<td>${i}</td><td><code>${k.entryPoint}</code></td><td>${groups}</td><td class="num">${k.ms.toFixed(3)}</td>`;
    body.append(tr);
  });
  const total = kernels.reduce((s, k) => s + k.ms, 0);
  const tr = document.createElement('tr');
  tr.innerHTML = `<td></td><th>all launches</th><td></td><td class="num">${total.toFixed(3)}</td>`;
  body.append(tr);
  document.getElementById('kernels').hidden = false;

  const right = predictions.filter((p, b) => p === data.labels[b]).length;
  const info = model.device.adapterInfo ?? {};
  status.textContent = `${right} of ${data.labels.length} glyphs classified right; `
    + `${kernels.length} kernels on ${[info.vendor, info.architecture].filter(Boolean).join(' ') || 'WebGPU'}.`;
  Object.assign(window.mimirDemo, {
    state: 'done', probs: Array.from(probs), predictions, kernels, adapter: info,
  });
}

main().catch((err) => {
  status.className = 'error';
  status.textContent = `${err.name}: ${err.message}`;
  // no WebGPU here: say how to turn it on (the host's message says it too, in one line)
  const off = /^WebGPU (found no adapter|is not available)/.test(err.message);
  if (off) document.getElementById('webgpu-help').hidden = false;
  Object.assign(window.mimirDemo, { state: 'error', error: `${err.name}: ${err.message}`, help: off });
});
