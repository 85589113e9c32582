import type { BenchServer } from '../support/database';
import type { Figure } from '../support/report';

/** One job of the benchmark: it prints as it goes and returns its lines of the summary. */
export interface Scenario {
  /** What BENCH_ONLY selects it by. */
  name: string;
  title: string;
  run(server: BenchServer): Promise<Figure[]>;
}
