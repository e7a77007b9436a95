import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router-dom';
import { LoomError } from '@loom/sdk';
import { App } from './App';
import './styles.css';

// A 401 on any call means the session ended (signed out elsewhere, expired, revoked): show sign-in.
const signedOut = (error: unknown) => {
  if (error instanceof LoomError && error.status === 401) queryClient.setQueryData(['session'], null);
};

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({ onError: signedOut }),
  mutationCache: new MutationCache({ onError: signedOut }),
  defaultOptions: {
    queries: {
      // A refusal is an answer, not a blip: retry only what the server calls retryable.
      retry: (count, error) => count < 2 && error instanceof LoomError && error.retryable,
      refetchOnWindowFocus: true,
    },
  },
});

const root = document.getElementById('root');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <BrowserRouter>
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </StrictMode>,
  );
}
