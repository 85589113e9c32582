import { validateAppConfig } from './app.config';

describe('OPERATOR_TOKEN', () => {
  it.each([
    ['a space', 'correct horse battery staple'],
    ['a character outside ASCII', 'tokén-with-accent-1234'],
    ['more than 512 characters', 'x'.repeat(513)],
    ['fewer than 16 characters', 'short-token'],
  ])('with %s fails the boot, naming the variable and never its value', (_, token) => {
    let message = '';
    try {
      validateAppConfig({ OPERATOR_TOKEN: token });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain(
      'OPERATOR_TOKEN = (hidden): OPERATOR_TOKEN must be 16 to 512 printable ASCII characters',
    );
    expect(message).not.toContain(token);
  });

  it('of 16 to 512 printable characters boots', () => {
    const token = `tok_${'A1-_.~!'.repeat(10)}`;
    expect(validateAppConfig({ OPERATOR_TOKEN: token }).OPERATOR_TOKEN).toBe(token);
  });
});
