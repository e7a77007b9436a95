import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vitest/config';

// The build goes to dist/, which the gateway serves at / (hashed assets under /assets/).
export default defineConfig({
  plugins: [react()],
  resolve: {
    alias: { '@loom/sdk': fileURLToPath(new URL('../sdk/typescript/src/index.ts', import.meta.url)) },
  },
  build: { outDir: 'dist', emptyOutDir: true, assetsDir: 'assets', sourcemap: false },
  test: { include: ['src/**/*.test.ts', 'src/**/*.test.tsx'], environment: 'node' },
});
