// `npm run lint:docs`: every relative link of the documentation leads to a file that exists, and
// every `#anchor` to a heading of that file (remark-validate-links reads the headings as GitHub
// renders their anchors, offline).
import remarkValidateLinks from 'remark-validate-links';

export default {
  plugins: [[remarkValidateLinks, { repository: false }]],
};
