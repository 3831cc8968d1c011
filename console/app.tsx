import { render } from "preact";
render(<p>flagsvc</p>, document.getElementById("app")!);
