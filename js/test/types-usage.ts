// Type-checked (tsc --noEmit -p test) against src/index.d.ts: the README's usage compiles.
import { load, evaluate, packUniform, ManifestError, type Manifest, type OutputArray } from '../src/index.js';

export async function example(manifest: Manifest): Promise<number> {
  const mlp = await load('kernels/mlp.manifest.json');
  const x = new Float32Array(37 * 13);
  const { out } = await mlp.run({ x, w1: new Float32Array(13 * 16), b1: [0, 1], w2: [true, false] }, { N: 37 });
  const first: number = out[0];
  const { outputs, kernels } = await mlp.profile({ x }, { N: 37 }, { repeat: 3 });
  const o: OutputArray = outputs.out;
  const ms: number = kernels[0].ms + o.length + first;
  const bytes: ArrayBuffer | null = packUniform(manifest, { N: 3 }, { alpha: 0.5 });
  const fromObject = await load(manifest, { files: { 'a.wgsl': '' }, baseUrl: 'https://example.invalid/' });
  fromObject.destroy();
  try {
    await mlp.run({}, {});
  } catch (err) {
    if (err instanceof ManifestError) return err.code === 'GPU043' ? -2 : -1;
  }
  return ms + evaluate('cdiv(N, 64)', { N: 100 }) + (bytes?.byteLength ?? 0) + mlp.stats.runs;
}
