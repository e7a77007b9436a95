import type { FormEvent, InputHTMLAttributes } from 'react';

/** A form's onSubmit that keeps the browser from posting the page and runs `run` (a mutation's
 * `mutate`, most often) instead. */
export function submitTo(run: () => void): (e: FormEvent) => void {
  return (e: FormEvent) => {
    e.preventDefault();
    run();
  };
}

type InputProps = Omit<InputHTMLAttributes<HTMLInputElement>, 'value' | 'onChange'>;

/** A labelled text input holding `value`; every edit calls `onValue` with the new text. Other
 * props (placeholder, required, aria-*) go to the input. */
export function TextField({ label, value, onValue, ...input }: { label: string; value: string; onValue: (text: string) => void } & InputProps) {
  return (
    <label>
      <span>{label}</span>
      <input {...input} value={value} onChange={(e) => onValue(e.target.value)} />
    </label>
  );
}
