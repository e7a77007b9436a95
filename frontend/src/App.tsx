import { useQuery } from '@tanstack/react-query';
import { Navigate, Route, Routes, useLocation } from 'react-router-dom';
import { ErrorNote } from './lib/errors';
import { readSession } from './lib/session';
import { ApiPage } from './pages/ApiPage';
import { AsyncApiPage } from './pages/AsyncApiPage';
import { CliLoginPage } from './pages/CliLoginPage';
import { DecisionsPage } from './pages/DecisionsPage';
import { HelpPage } from './pages/HelpPage';
import { LoginPage, SignedOut } from './pages/LoginPage';
import { PoliciesPage } from './pages/PoliciesPage';
import { TasksPage } from './pages/TasksPage';
import { Shell } from './shell/Shell';

/** Pages that need no session: they never ask for one (a signed-out visitor's 401 is no error). */
const PUBLIC = new Set(['/login', '/api', '/asyncapi']);

export function App() {
  const { pathname } = useLocation();
  const session = useQuery({ queryKey: ['session'], queryFn: readSession, staleTime: 60_000, enabled: !PUBLIC.has(pathname) });
  return (
    <Routes>
      <Route path="/login" element={<LoginPage />} />
      <Route path="/asyncapi" element={<AsyncApiPage />} />
      <Route path="/api" element={<ApiPage />} />
      <Route
        path="*"
        element={
          session.isPending ? (
            <p className="loading" role="status">
              Loading…
            </p>
          ) : session.error ? (
            <main className="page">
              <ErrorNote error={session.error} title="Could not read your session" />
            </main>
          ) : !session.data ? (
            <SignedOut />
          ) : (
            <Shell session={session.data}>
              <Routes>
                <Route path="/" element={<Navigate to="/tasks" replace />} />
                <Route path="/tasks" element={<TasksPage />} />
                <Route path="/tasks/:taskId" element={<TasksPage />} />
                <Route path="/decisions" element={<DecisionsPage />} />
                <Route path="/decisions/:key" element={<DecisionsPage />} />
                <Route path="/policies" element={<PoliciesPage />} />
                <Route path="/help" element={<HelpPage />} />
                <Route path="/cli-login" element={<CliLoginPage />} />
                <Route path="*" element={<NotFound />} />
              </Routes>
            </Shell>
          )
        }
      />
    </Routes>
  );
}

function NotFound() {
  return (
    <section className="page">
      <h1>Not found</h1>
      <p>This page does not exist. Use the navigation above.</p>
    </section>
  );
}
