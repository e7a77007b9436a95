# example-needs: @loom-coord/sdk published on the npm registry (until then, npm install <your Loom checkout>/sdk/typescript)
npm install @loom-coord/sdk
