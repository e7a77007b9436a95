import { createContext, useContext } from 'react';
import type { Role } from '@loom/sdk';
import type { Session } from './session';

export interface Scope {
  session: Session;
  namespace: string;
  role: Role | undefined;
  setNamespace: (ns: string) => void;
}

export const ScopeContext = createContext<Scope | undefined>(undefined);

/** The signed-in session and the header's namespace (pages render only inside the shell). */
export function useScope(): Scope {
  const scope = useContext(ScopeContext);
  if (!scope) throw new Error('useScope outside the signed-in shell');
  return scope;
}
